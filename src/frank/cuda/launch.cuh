#pragma once
// Programmatic dependent launch (sm_90+): a kernel launched with launch_dependent may be scheduled
// while the stream's previous kernel is still running, so the gap between two kernels of a step
// (launch latency, block scheduling, the previous kernel's tail) overlaps. Every such kernel calls
// follow_previous_kernel() before it touches memory: griddepcontrol.wait returns only when the
// previous kernel has completed and its writes are visible, so the order of the stream holds.
#include <cuda_runtime.h>

namespace frank::cuda {

// The first statement of a kernel launched with launch_dependent (before any early return).
__device__ __forceinline__ void follow_previous_kernel() {
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();  // the stream's next kernel may now be scheduled
}

template <class... Params, class... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                             cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &overlap;
  config.numAttrs = 1;
  if (const cudaError_t e = cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...)) return e;
  return cudaGetLastError();
}

}  // namespace frank::cuda
