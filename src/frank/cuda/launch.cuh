#pragma once
// Programmatic dependent launch (sm_90+): a kernel launched with launch_dependent may be scheduled
// while the stream's previous kernel is still running, so the gap between two kernels of a step
// (launch latency, block scheduling, the previous kernel's tail) overlaps. Every such kernel calls
// follow_previous_kernel() before it touches memory: griddepcontrol.wait returns only when the
// previous kernel has completed and its writes are visible, so the order of the stream holds.
#include <cuda_runtime.h>

namespace frank::cuda {

// A kernel carries the priority of the stream it is launched on (the branch stream's is the
// device's greatest: branch_stream.h) as a launch attribute, so that a captured graph, instantiated
// with cudaGraphInstantiateFlagUseNodePriority, keeps it node by node. False for the default
// priority: nothing to attach.
inline bool stream_priority(cudaStream_t stream, cudaLaunchAttribute& attribute) {
  int priority = 0;
  if (cudaStreamGetPriority(stream, &priority) != cudaSuccess || priority == 0) return false;
  attribute.id = cudaLaunchAttributePriority;
  attribute.val.priority = priority;
  return true;
}

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
  cudaLaunchAttribute attributes[2]{};
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attributes;
  config.numAttrs = stream_priority(stream, attributes[1]) ? 2 : 1;
  if (const cudaError_t e = cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...)) return e;
  return cudaGetLastError();
}

}  // namespace frank::cuda
