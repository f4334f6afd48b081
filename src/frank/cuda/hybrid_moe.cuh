#pragma once
// The GPU's small part in a MoE step whose routed experts are split between GPU and CPU (issue 7;
// cuda::CpuExperts and CudaOps::moe): the GPU's share of the routing, and the CPU's sum added
// back. Asynchronous on `stream`, no allocation (ops.cuh's contract).
#include <cstdint>

#include <cuda_runtime.h>

namespace frank::cuda {

// gpu_experts[i] = experts[i], or -1 where it is a CPU-homed expert (on_cpu[e] != 0, on_cpu [E]);
// moe_experts skips -1, so the GPU computes the shared expert and the GPU-homed routings only.
cudaError_t drop_cpu_experts(const int32_t* experts, int count, const uint8_t* on_cpu, int E, int32_t* gpu_experts,
                             cudaStream_t stream);

// out[i] += partial[i] for i < count.
cudaError_t add_partial(float* out, const float* partial, int64_t count, cudaStream_t stream);

}  // namespace frank::cuda
