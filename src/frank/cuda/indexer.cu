// Indexer scores (contract in ops.cuh; engine::indexer_scores).
//
// Per token the scores are a small GEMM, Q [H, d] · K^T [d, cols], followed by ReLU, the head
// weights and a sum over heads. One block takes a tile of kCols keys and a group of up to kTokens
// tokens: the tile's keys are loaded into shared memory once (read once from memory per group),
// then for each token and each run of kHeads heads the query rows stream through shared memory in
// slices of kDepth. Each of the 16 x 16 threads holds a 4 x 4 register tile (heads ty + 16i, keys
// tx + 16j); after ReLU and weighting it folds its 4 heads, and the block sums the 16 rows of
// threads. Tiles a token cannot see yet are written -inf without any arithmetic.
#include <cmath>
#include <cstdint>

#include "frank/cuda/ops.cuh"
#include "frank/cuda/launch.cuh"

namespace frank::cuda {
namespace {

constexpr int kCols = 64;      // keys per block
constexpr int kHeads = 64;     // heads per pass
constexpr int kDepth = 32;     // query dims per shared slice
constexpr int kMaxDim = 128;   // the key tile holds whole key rows
constexpr int kTokens = 8;     // tokens per block
constexpr int kThreads = 256;  // 16 x 16

__global__ void __launch_bounds__(kThreads)
    indexer_kernel(const float* q, const float* w, int n, int H, int d, const float* keys, const int64_t* start_at,
                   int ratio, int cols, float scale, float* scores) {
  follow_previous_kernel();
  const int64_t start = *start_at;
  // Transposed ([dim][key], [dim][head]) so the inner loop reads consecutive words; the +1 padding
  // keeps the transposing stores free of bank conflicts.
  __shared__ float ks[kMaxDim][kCols + 1];
  __shared__ float qs[kDepth][kHeads + 1];
  __shared__ float sums[16][kCols];

  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int col0 = blockIdx.x * kCols;
  const int t0 = blockIdx.y * kTokens, t1 = min(n, t0 + kTokens);

  for (int i = tid; i < kCols * d; i += kThreads) {
    const int e = i / d, k = i % d;
    ks[k][e] = col0 + e < cols ? keys[static_cast<int64_t>(col0 + e) * d + k] : 0.f;
  }

  for (int t = t0; t < t1; ++t) {
    const int64_t visible64 = ratio > 0 ? (start + t + 1) / ratio : cols;  // ratio 0: every column
    const int visible = visible64 < cols ? static_cast<int>(visible64) : cols;
    float* row = scores + static_cast<int64_t>(t) * cols;
    if (col0 >= visible) {  // the same for every thread of the block
      if (tid < kCols && col0 + tid < cols) row[col0 + tid] = -INFINITY;
      continue;
    }
    float sum[4] = {0.f, 0.f, 0.f, 0.f};  // keys tx + 16j, over all heads so far
    for (int h0 = 0; h0 < H; h0 += kHeads) {
      float acc[4][4] = {};
      for (int k0 = 0; k0 < d; k0 += kDepth) {
        __syncthreads();  // the previous slice is consumed (and, the first time, ks is stored)
        for (int i = tid; i < kHeads * kDepth; i += kThreads) {
          const int hh = i / kDepth, k = i % kDepth;
          const bool in = h0 + hh < H && k0 + k < d;
          qs[k][hh] = in ? q[(static_cast<int64_t>(t) * H + h0 + hh) * d + k0 + k] : 0.f;
        }
        __syncthreads();
        const int depth = min(kDepth, d - k0);
        for (int k = 0; k < depth; ++k) {
          float a[4], b[4];
          for (int i = 0; i < 4; ++i) a[i] = qs[k][ty + 16 * i];
          for (int j = 0; j < 4; ++j) b[j] = ks[k0 + k][tx + 16 * j];
          for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
        }
      }
      for (int i = 0; i < 4; ++i) {
        const int h = h0 + ty + 16 * i;
        if (h >= H) continue;
        const float weight = w[static_cast<int64_t>(t) * H + h];
        for (int j = 0; j < 4; ++j) sum[j] += fmaxf(acc[i][j], 0.f) * scale * weight;
      }
    }
    for (int j = 0; j < 4; ++j) sums[ty][tx + 16 * j] = sum[j];
    __syncthreads();
    if (tid < kCols && col0 + tid < cols) {
      float s = 0.f;
      for (int r = 0; r < 16; ++r) s += sums[r][tid];
      row[col0 + tid] = col0 + tid < visible ? s : -INFINITY;
    }
    // sums is written again only after the next token's first slice barrier.
  }
}

}  // namespace

cudaError_t indexer_scores(const float* q, const float* w, int n, int H, int d, const float* keys,
                           const int64_t* start, int ratio, int cols, float* scores, cudaStream_t stream) {
  if (!q || !w || !keys || !start || !scores || n < 0 || H < 1 || d < 1 || d > kMaxDim || ratio < 0 || cols < 0)
    return cudaErrorInvalidValue;
  const int64_t groups = (static_cast<int64_t>(n) + kTokens - 1) / kTokens;
  if (groups > 65535) return cudaErrorInvalidValue;
  if (n == 0 || cols == 0) return cudaSuccess;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));  // as the reference rounds it
  const dim3 grid((cols + kCols - 1) / kCols, static_cast<unsigned>(groups));
  if (const cudaError_t e = launch_dependent(indexer_kernel, dim3(grid), dim3(kThreads), 0, stream, q, w, n, H, d, keys,
                                             start, ratio, cols, scale, scores))
    return e;
  return cudaGetLastError();
}

}  // namespace frank::cuda
