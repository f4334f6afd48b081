// Greedy choice on the GPU (contract in ops.cuh): one block per row. Each thread scans a strided
// slice keeping its first largest (value, index); the block then reduces the candidates with the
// same rule, so the result is the sequential scan's: the lowest index of the largest value.
#include <cmath>
#include <cstdint>

#include "frank/cuda/launch.cuh"
#include "frank/cuda/ops.cuh"

namespace frank::cuda {
namespace {

constexpr int kThreads = 1024;

struct Best {
  float value;
  int64_t index;  // INT64_MAX: no candidate (every value NaN)
};

// a or b, whichever a left-to-right scan keeping the first strict maximum would end on (NaN never wins).
__device__ Best better(Best a, Best b) {
  if (b.index == INT64_MAX) return a;
  if (a.index == INT64_MAX) return b;
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* logits, int64_t vocab, int32_t* out) {
  follow_previous_kernel();
  __shared__ Best warp_best[kThreads / 32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  Best best{0.f, INT64_MAX};
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads)
    if (!isnan(row[i])) best = better(best, Best{row[i], i});
  for (int offset = 16; offset > 0; offset /= 2) {
    const Best other{__shfl_down_sync(0xffffffffu, best.value, offset),
                     static_cast<int64_t>(__shfl_down_sync(0xffffffffu, static_cast<long long>(best.index), offset))};
    best = better(best, other);
  }
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) best = better(best, warp_best[w]);
    // The sequential scan starts at index 0 and a NaN there is never replaced.
    out[blockIdx.x] = isnan(row[0]) || best.index == INT64_MAX ? 0 : static_cast<int32_t>(best.index);
  }
}

}  // namespace

cudaError_t argmax_rows(const float* logits, int rows, int64_t vocab, int32_t* out, cudaStream_t stream) {
  if (!logits || !out || rows < 0 || vocab < 1 || vocab > INT32_MAX) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (const cudaError_t e = launch_dependent(argmax_kernel, dim3(rows), dim3(kThreads), 0, stream, logits, vocab, out))
    return e;
  return cudaGetLastError();
}

}  // namespace frank::cuda
