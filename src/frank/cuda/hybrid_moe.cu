// hybrid_moe.cuh: the GPU's share of a split MoE step's routing, the handshake with the host, and
// the CPU's sum added back.
#include "frank/cuda/hybrid_moe.cuh"

#include <algorithm>

namespace frank::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kHandOverBlocks = 128;  // enough to stream a prefill chunk's x over PCIe; grid-stride past it

__device__ void store_release_system(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ uint64_t load_acquire_system(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

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

// Every thread fences its copies at system scope before the block counts itself in; the last block
// to arrive (it has seen every other block's count, after their fences) publishes the hand-over.
__global__ void hand_over_kernel(const float* __restrict__ x, int64_t x_count, const int32_t* __restrict__ experts,
                                 const float* __restrict__ weights, int routing_count, int layer, int n,
                                 float* host_x, int32_t* host_experts, float* host_weights,
                                 HandshakeCounters* counters, HandshakeMailbox* mailbox) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < x_count; i += stride)
    host_x[i] = x[i];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < routing_count; i += stride) {
    host_experts[i] = experts[i];
    host_weights[i] = weights[i];
  }
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (atomicAdd(&counters->blocks_arrived, 1u) != gridDim.x - 1) return;
  __threadfence_system();
  counters->blocks_arrived = 0;  // for the next hand-over, which comes after this kernel
  const uint64_t seq = counters->issued + 1;
  counters->issued = seq;
  mailbox->layer = layer;
  mailbox->tokens = n;
  store_release_system(&mailbox->request, seq);
}

__global__ void wait_for_host_kernel(const HandshakeCounters* counters, const HandshakeMailbox* mailbox) {
  const uint64_t want = counters->issued;
  while (load_acquire_system(&mailbox->done) < want) __nanosleep(256);
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

cudaError_t hand_over_layer(const float* x, int n, int D, const int32_t* experts, const float* weights, int k,
                            int layer, float* host_x, int32_t* host_experts, float* host_weights,
                            HandshakeCounters* counters, HandshakeMailbox* mailbox, cudaStream_t stream) {
  if (n < 0 || D < 1 || k < 1 || !counters || !mailbox ||
      (n > 0 && (!x || !experts || !weights || !host_x || !host_experts || !host_weights)))
    return cudaErrorInvalidValue;
  const int64_t x_count = int64_t{n} * D, routing_count = int64_t{n} * k;
  if (routing_count > 0x7fffffff) return cudaErrorInvalidValue;
  // At least one block: an empty hand-over is still published (the host answers it with nothing).
  const int64_t blocks = std::clamp<int64_t>((x_count + kThreads - 1) / kThreads, 1, kHandOverBlocks);
  hand_over_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      x, x_count, experts, weights, static_cast<int>(routing_count), layer, n, host_x, host_experts, host_weights,
      counters, mailbox);
  return cudaGetLastError();
}

cudaError_t wait_for_host(const HandshakeCounters* counters, const HandshakeMailbox* mailbox, cudaStream_t stream) {
  if (!counters || !mailbox) return cudaErrorInvalidValue;
  wait_for_host_kernel<<<1, 1, 0, stream>>>(counters, mailbox);
  return cudaGetLastError();
}

}  // namespace frank::cuda
