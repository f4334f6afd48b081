// Indexer scores (contract in ops.cuh; engine::indexer_scores).
//
// Per token the scores are a small GEMM, Q [H, d] · K^T [d, cols], followed by ReLU, the head
// weights and a sum over heads. One block takes a tile of kCols keys and a group of up to kTokens
// tokens: the tile's keys are loaded into shared memory once (read once from memory per group),
// then for each token and each run of kHeads heads the query rows stream through shared memory in
// slices of kDepth. Each of the 16 x 16 threads holds a 4 x 4 register tile (heads ty + 16i, keys
// tx + 16j); after ReLU and weighting it folds its 4 heads, and the block sums the 16 rows of
// threads. Tiles a token cannot see yet are written -inf without any arithmetic.
// Loads are issued ahead of their use, so that a block waits for memory about once per token
// rather than once per loop iteration (a decode step's indexer at 32K tokens took 18.6 us on an H200
// when each key and query load waited for the previous store): the key tile's loads all at once,
// the first query slice with them, and each later slice while the one before is multiplied. The
// arithmetic and its order are unchanged.
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

constexpr int kQLoads = kHeads * kDepth / kThreads;          // query values a thread moves per slice
constexpr int kKeyQuads = kCols * kMaxDim / 4 / kThreads;     // 16-byte key loads a thread issues

// Whether rows of d floats starting at p can be read 16 bytes at a time (V4: d = 128, cudaMalloc'd).
__device__ bool quad_rows(const float* p, int d) { return d % 4 == 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The key tile, ks[k][e] = keys[col0 + e][k] (0 past cols). Every load is issued before the first
// store, so the tile costs one round trip to memory rather than a chain of load-store iterations.
__device__ void load_key_tile(const float* keys, int d, int col0, int cols, float (&ks)[kMaxDim][kCols + 1]) {
  const int tid = threadIdx.x;
  if (quad_rows(keys, d)) {
    const int quads = d / 4, count = kCols * quads;
    float4 v[kKeyQuads];
#pragma unroll
    for (int r = 0; r < kKeyQuads; ++r) {
      const int i = tid + r * kThreads, e = i / quads;
      v[r] = i < count && col0 + e < cols
                 ? __ldg(reinterpret_cast<const float4*>(keys + static_cast<int64_t>(col0 + e) * d) + i % quads)
                 : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int r = 0; r < kKeyQuads; ++r) {
      const int i = tid + r * kThreads, e = i / quads, k = i % quads * 4;
      if (i < count) ks[k][e] = v[r].x, ks[k + 1][e] = v[r].y, ks[k + 2][e] = v[r].z, ks[k + 3][e] = v[r].w;
    }
    return;
  }
  for (int i = tid; i < kCols * d; i += kThreads) {
    const int e = i / d, k = i % d;
    ks[k][e] = col0 + e < cols ? keys[static_cast<int64_t>(col0 + e) * d + k] : 0.f;
  }
}

// One slice of token t's queries (heads h0 .. h0+kHeads, dims k0 .. k0+kDepth, 0 outside H x d),
// held in registers between its loads (issued a slice ahead of its use) and its store into qs[k][h].
// Quad rows: thread value 4r + c is head (tid + r*kThreads) / 8, dim 4 * ((tid + r*kThreads) % 8) + c,
// so a warp's stores fall in 32 different banks; else value r is element tid + r*kThreads of the
// [kHeads][kDepth] slice.
struct QuerySlice {
  float v[kQLoads];

  __device__ void load(const float* q, int t, int H, int d, int h0, int k0, bool quads) {
    const int tid = threadIdx.x;
    if (quads) {
#pragma unroll
      for (int r = 0; r < kQLoads / 4; ++r) {
        const int i = tid + r * kThreads, hh = i / (kDepth / 4), k = k0 + i % (kDepth / 4) * 4;
        const float4 x = h0 + hh < H && k < d
                             ? __ldg(reinterpret_cast<const float4*>(q + (static_cast<int64_t>(t) * H + h0 + hh) * d + k))
                             : make_float4(0.f, 0.f, 0.f, 0.f);
        v[4 * r] = x.x, v[4 * r + 1] = x.y, v[4 * r + 2] = x.z, v[4 * r + 3] = x.w;
      }
      return;
    }
#pragma unroll
    for (int r = 0; r < kQLoads; ++r) {
      const int i = tid + r * kThreads, hh = i / kDepth, k = i % kDepth;
      v[r] = h0 + hh < H && k0 + k < d ? q[(static_cast<int64_t>(t) * H + h0 + hh) * d + k0 + k] : 0.f;
    }
  }

  __device__ void store(float (&qs)[kDepth][kHeads + 1], bool quads) const {
    const int tid = threadIdx.x;
#pragma unroll
    for (int r = 0; r < kQLoads; ++r) {
      const int i = quads ? tid + r / 4 * kThreads : tid + r * kThreads;
      const int hh = quads ? i / (kDepth / 4) : i / kDepth, k = quads ? i % (kDepth / 4) * 4 + r % 4 : i % kDepth;
      qs[k][hh] = v[r];
    }
  }
};

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

  const bool quads = quad_rows(q, d);
  QuerySlice slice;
  if (t0 < t1) slice.load(q, t0, H, d, 0, 0, quads);  // in flight with the key tile's loads
  load_key_tile(keys, d, col0, cols, ks);

  for (int t = t0; t < t1; ++t) {
    const int64_t visible64 = ratio > 0 ? (start + t + 1) / ratio : cols;  // ratio 0: every column
    const int visible = visible64 < cols ? static_cast<int>(visible64) : cols;
    float* row = scores + static_cast<int64_t>(t) * cols;
    if (col0 >= visible) {  // the same for every thread of the block
      if (tid < kCols && col0 + tid < cols) row[col0 + tid] = -INFINITY;
      if (t + 1 < t1) slice.load(q, t + 1, H, d, 0, 0, quads);
      continue;
    }
    float sum[4] = {0.f, 0.f, 0.f, 0.f};  // keys tx + 16j, over all heads so far
    for (int h0 = 0; h0 < H; h0 += kHeads) {
      float acc[4][4] = {}, weight[4];
      for (int i = 0; i < 4; ++i) {  // used after the slices: their latency hides behind them
        const int h = h0 + ty + 16 * i;
        weight[i] = h < H ? w[static_cast<int64_t>(t) * H + h] : 0.f;
      }
      for (int k0 = 0; k0 < d; k0 += kDepth) {
        __syncthreads();  // the previous slice is consumed (and, the first time, ks is stored)
        slice.store(qs, quads);
        // The next slice's loads go out now: the next dims, the next heads, or the next token's first.
        if (k0 + kDepth < d)
          slice.load(q, t, H, d, h0, k0 + kDepth, quads);
        else if (h0 + kHeads < H)
          slice.load(q, t, H, d, h0 + kHeads, 0, quads);
        else if (t + 1 < t1)
          slice.load(q, t + 1, H, d, 0, 0, quads);
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
        if (h0 + ty + 16 * i >= H) continue;
        for (int j = 0; j < 4; ++j) sum[j] += fmaxf(acc[i][j], 0.f) * scale * weight[i];
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
