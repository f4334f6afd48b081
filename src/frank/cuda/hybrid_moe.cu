// hybrid_moe.cuh: the GPU's share of a split MoE step's routing, and the CPU's sum added back.
#include "frank/cuda/hybrid_moe.cuh"

namespace frank::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void drop_cpu_experts_kernel(const int32_t* __restrict__ experts, int count,
                                        const uint8_t* __restrict__ on_cpu, int E, int32_t* __restrict__ gpu_experts) {
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= count) return;
  const int32_t e = experts[i];
  gpu_experts[i] = e >= 0 && e < E && on_cpu[e] ? -1 : e;
}

__global__ void add_partial_kernel(float* __restrict__ out, const float* __restrict__ partial, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < count) out[i] += partial[i];
}

}  // namespace

cudaError_t drop_cpu_experts(const int32_t* experts, int count, const uint8_t* on_cpu, int E, int32_t* gpu_experts,
                             cudaStream_t stream) {
  if (count < 0 || E < 1 || (count > 0 && (!experts || !on_cpu || !gpu_experts))) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  drop_cpu_experts_kernel<<<(count + kThreads - 1) / kThreads, kThreads, 0, stream>>>(experts, count, on_cpu, E,
                                                                                      gpu_experts);
  return cudaGetLastError();
}

cudaError_t add_partial(float* out, const float* partial, int64_t count, cudaStream_t stream) {
  if (count < 0 || (count > 0 && (!out || !partial))) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  add_partial_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(out, partial, count);
  return cudaGetLastError();
}

}  // namespace frank::cuda
