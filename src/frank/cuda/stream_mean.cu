// stream_mean.cuh: the mean of each token's residual streams.
#include "frank/cuda/stream_mean.cuh"

namespace frank::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void stream_mean_kernel(const float* __restrict__ streams, int64_t count, int N, int D,
                                   float* __restrict__ out, int64_t ldo) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;  // t * D + d
  if (i >= count) return;
  const int64_t t = i / D, d = i % D;
  const float* x = streams + t * N * D + d;
  float sum = 0.0f;  // the reference's order, no contraction
  for (int j = 0; j < N; ++j) sum = __fadd_rn(sum, x[int64_t{j} * D]);
  out[t * ldo + d] = __fdiv_rn(sum, static_cast<float>(N));
}

}  // namespace

cudaError_t stream_mean(const float* streams, int64_t n, int N, int D, float* out, int64_t ldo, cudaStream_t stream) {
  if (n < 0 || N < 1 || D < 1 || ldo < D || (n > 0 && (!streams || !out))) return cudaErrorInvalidValue;
  const int64_t count = n * D;
  if (count == 0) return cudaSuccess;
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  stream_mean_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(streams, count, N, D, out, ldo);
  return cudaGetLastError();
}

}  // namespace frank::cuda
