// stream_add.cuh: one row added to every residual stream of its token.
#include "frank/cuda/stream_add.cuh"

namespace frank::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void add_to_streams_kernel(float* __restrict__ streams, const float* __restrict__ x, int64_t count, int N,
                                      int D) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;  // index into streams
  if (i >= count) return;
  const int64_t t = i / (int64_t{N} * D), d = i % D;
  streams[i] += x[t * D + d];
}

}  // namespace

cudaError_t add_to_streams(float* streams, const float* x, int64_t n, int N, int D, cudaStream_t stream) {
  if (n < 0 || N < 1 || D < 1 || (n > 0 && (!streams || !x))) return cudaErrorInvalidValue;
  const int64_t count = n * N * D;
  if (count == 0) return cudaSuccess;
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  add_to_streams_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(streams, x, count, N, D);
  return cudaGetLastError();
}

}  // namespace frank::cuda
