// Manifold-constrained hyper-connections (contracts in ops.cuh and v41_ops.cuh): hc_pre, hc_post,
// hc_head, and V4.1's single-pass pieces hc_map (hc_pre's mix alone) and hc_collapse (hc_pre's
// collapse with a given pre).
//
// hc_pre, hc_map and hc_head are one kernel each (site_kernel), in two phases:
//   1. Every block: split-K partial dot products. fn · streams[t] is (2+N)*N rows (hc_head: N) of
//      K = N*D values, 24 x 16384 (1.5 MB) at the real shape. Block (s, g) takes one chunk of K
//      columns of every row for token group g (up to kTokens tokens), so ~128 blocks read the
//      matrix at once, each value once per group. The RMS of the streams is not applied first:
//      fn · (x / rms) = (fn · x) / rms, so the sum of squares rides along as one more row and the
//      norm is applied to the finished sums. Partial sums go to scratch, the op's own [n, D]
//      output (input / out), as [t][row][split]; then the block counts itself in its group's
//      arrival counter.
//   2. The group's last block to arrive (it alone sees the count complete) sums each row's partials
//      in a fixed order, so a result does not depend on which block came last. Then warps
//      0..kTokens-1 each make one token's mix (sigmoids a lane each, Sinkhorn: hc_sinkhorn.cuh)
//      while the other warps collapse the streams with pre and RMS-normalise the collapsed rows,
//      token after token (hc_map: the mix only; hc_head: the collapse only).
// One kernel instead of a partial and a finishing kernel saves a launch and a grid-completion wait
// per site; the finishing block's longest path is Sinkhorn's 39 dependent normalisations, which
// overlap the collapse. The arrival counters are static device memory, one per token group: each
// launch leaves them at zero (the count wraps: arrived_last), so calls must not run concurrently
// (calls on one stream never do).
// hc_map has no [n, D] output: its partials go to a static scratch buffer (kMapScratch floats shared
// by the call's tokens; like the counters, one call at a time).
// Shapes whose scratch row cannot hold the partials of even one split (D < rows + 1; hc_map: more
// than kMapScratch / (rows + 1) tokens) take one split without the sum of squares, into mix (hc_pre,
// hc_map) or out (hc_head, D >= N); the finishing block then sums the squares itself.
// hc_collapse needs no logits: collapse_kernel, one block per token, runs the collapse alone; hc_sum
// is the same kernel with the norm left out.
#include <cstdint>

#include "frank/cuda/hc_sinkhorn.cuh"
#include "frank/cuda/launch.cuh"
#include "frank/cuda/ops.cuh"
#include "frank/cuda/v41_ops.cuh"
#include "frank/cuda/warp_reduce.cuh"

namespace frank::cuda {
namespace {

constexpr int kMaxStreams = 8;                                  // largest N
constexpr int kMaxMix = (2 + kMaxStreams) * kMaxStreams;        // logit rows (hc_pre), mix width
constexpr int kTokens = 8;                                      // tokens per group
constexpr int kMaxGroups = 65535;                               // grid.y limit
constexpr int kRowsPerWarp = 32 / kTokens;                      // a warp's partial sums fill its 32 lanes
constexpr int kThreads = 512;                                   // every block of site_kernel
constexpr int kWarps = kThreads / 32;
constexpr int kMixWarps = kTokens;                              // finishing: one mixing warp per token
constexpr int kCollapseThreads = kThreads - 32 * kMixWarps;     // finishing: the others collapse
constexpr int kCollapseWarps = kCollapseThreads / 32;
constexpr int kRowsAtOnce = 4;                                  // finishing: partial rows a warp sums together
constexpr int kHold = 4;                                        // collapse vectors a thread keeps in registers
constexpr int kPostThreads = 256;
constexpr int64_t kMapScratch = int64_t{1} << 19;               // floats: 2 MB, every split of 64 tokens (N = 4)

__device__ unsigned g_arrivals[kMaxGroups];  // blocks of a group done with phase 1; zero between launches
__device__ float g_map_partials[kMapScratch];  // hc_map's split partial sums

// What a site_kernel finishes with: mix and the collapse (hc_pre), mix (hc_map), the collapse (hc_head).
enum class Mode { Pre, Map, Head };

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// V consecutive floats: one 16-byte access for V = 4.
template <int V>
__device__ void load(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  } else {
    v[0] = __ldg(p);
  }
}

template <int V>
__device__ void store(float* p, const float (&v)[V]) {
  if constexpr (V == 4)
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  else
    p[0] = v[0];
}

struct Site {
  const float* streams;  // [n, K]
  int n, N, D;
  int64_t K;               // N * D
  const float* fn;         // [fn_rows, K]
  int fn_rows;             // (2+N)*N for hc_pre, N for hc_head
  int rows;                // fn_rows, plus one when the sum of squares is a row
  int64_t chunk;           // columns per split: a multiple of 32 * V
  int splits;
  float* part;             // part[t*ld + r*splits + s]: out, hc_map's scratch (null), or mix (toy shapes)
  int64_t ld;
  const float* base;
  const float* scale;
  int sinkhorn_iters;      // hc_pre, hc_map
  float hc_eps, norm_eps;
  const float* norm_weight;
  float* mix;              // [n, 2N + N*N]: hc_pre, hc_map
  float* out;              // [n, D]: hc_pre, hc_head
};

// The fn values of a warp's first rows at a lane's first columns in phase 1 (at the real shape,
// all it reads): fn is a weight, never written during a step, so site_kernel asks for them before
// it waits for the previous kernel, and their memory latency passes during that wait.
template <int V>
__device__ void first_fn_values(const Site& p, float (&f)[kRowsPerWarp][V]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int64_t c0 = blockIdx.x * p.chunk, c1 = c0 + p.chunk < p.K ? c0 + p.chunk : p.K, c = c0 + lane * V;
#pragma unroll
  for (int b = 0; b < kRowsPerWarp; ++b) {
    const int r = warp * kRowsPerWarp + b;
    if (r < p.fn_rows && c < c1) load(p.fn + r * p.K + c, f[b]);
  }
}

// Phase 1 of block (s, g): for tokens t0.. and columns [s*chunk, (s+1)*chunk), the partial dot
// products of every fn row (row fn_rows: x · x). A warp takes kRowsPerWarp rows at a time; each
// lane accumulates its columns for kRowsPerWarp x kTokens sums, which reduce_scatter adds up.
// first_fn: first_fn_values's.
template <int V>
__device__ void partial_sums(const Site& p, int t0, int nt, const float (&first_fn)[kRowsPerWarp][V]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int s = blockIdx.x;
  const int64_t c0 = s * p.chunk, c1 = c0 + p.chunk < p.K ? c0 + p.chunk : p.K;
  const float* x = p.streams + t0 * p.K;
  for (int r0 = warp * kRowsPerWarp; r0 < p.rows; r0 += kWarps * kRowsPerWarp) {
    float acc[kRowsPerWarp * kTokens] = {};
    for (int64_t c = c0 + lane * V; c < c1; c += 32 * V) {
      const bool first = r0 == warp * kRowsPerWarp && c == c0 + lane * V;
      float xv[kTokens][V] = {};
#pragma unroll
      for (int t = 0; t < kTokens; ++t)
        if (t < nt) load(x + t * p.K + c, xv[t]);
#pragma unroll
      for (int b = 0; b < kRowsPerWarp; ++b) {
        const int r = r0 + b;
        if (r >= p.rows) break;
        float fv[V];
        if (r < p.fn_rows) {
          if (first) {
#pragma unroll
            for (int v = 0; v < V; ++v) fv[v] = first_fn[b][v];
          } else {
            load(p.fn + r * p.K + c, fv);
          }
        }
#pragma unroll
        for (int t = 0; t < kTokens; ++t)
#pragma unroll
          for (int v = 0; v < V; ++v) {
            const float f = r < p.fn_rows ? fv[v] : xv[t][v];  // row fn_rows: the sum of squares
            acc[b * kTokens + t] = fmaf(f, xv[t][v], acc[b * kTokens + t]);
          }
      }
    }
    const float sum = reduce_scatter<32>(acc, lane);  // lane: row r0 + lane / kTokens, token lane % kTokens
    const int r = r0 + lane / kTokens, t = lane % kTokens;
    if (r < p.rows && t < nt) p.part[(t0 + t) * p.ld + int64_t{r} * p.splits + s] = sum;
  }
}

// Asks the L2 for `count` floats from p, the lines spread over the blocks of grid row 0.. (each
// block a few): the finishing block then finds them there instead of in HBM.
__device__ void prefetch_l2(const float* p, int64_t count) {
  constexpr int kLine = 32;  // floats per 128-byte line
  for (int64_t i = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * kLine; i < count;
       i += int64_t{gridDim.x} * blockDim.x * kLine)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + i));
}

// After phase 1: true in the last block of this group to get here (every other block's partial
// sums are then visible to it). Thread 0 counts the block with one acquire-release atomic at GPU
// scope, between two block barriers: the release covers the partial sums the block's threads
// wrote before the first barrier, and the last block's acquire makes every block's visible to its
// threads after the second (PTX memory model: barriers order the threads of a block, release and
// acquire are cumulative). It replaced a fence in every thread before the count and one after:
// ~2 us a decode step less on an H200 (bench/results/decode-h200-2026-12-01-s12, run 4).
__device__ bool arrived_last(unsigned* arrivals) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned before;  // atom.inc: the last arrival (before = gridDim.x - 1) wraps the count to 0
    asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;"
                 : "=r"(before)
                 : "l"(arrivals), "r"(gridDim.x - 1)
                 : "memory");
    last = before == gridDim.x - 1;
  }
  __syncthreads();
  return last;
}

// Sum over the Threads collapsing threads, warps FirstWarp.. of the block (named barrier 1: in
// site_kernel the mixing warps never wait on it). `red` holds Threads / 32 floats.
template <int Threads, int FirstWarp>
__device__ float collapse_sum(float v, float* red) {
  v = warp_sum(v);
  asm volatile("bar.sync 1, %0;" ::"n"(Threads) : "memory");  // red may still be read
  if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32 - FirstWarp] = v;
  asm volatile("bar.sync 1, %0;" ::"n"(Threads) : "memory");
  float s = 0.0f;
  for (int i = 0; i < Threads / 32; ++i) s += red[i];
  return s;
}

__device__ float inv_rms(float sum_sq, int64_t count, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(count) + eps);
}

// pre[j] = sigmoid(m[j] * inv * scale + base[j]) + hc_eps, the same bits in both roles.
__device__ float pre_weight(float m, float inv, float scale, float base, float hc_eps) {
  return sigmoid(m * inv * scale + base) + hc_eps;
}

// One mixing warp: mix = [pre | post | Sinkhorn(comb)] of one token from its logits m (times
// inv). Lane i < 2N writes pre or post i (one copy of each one's code); comb is one element a
// lane where it fits (sinkhorn_lanes), else held whole by every lane (sinkhorn). Not inlined: the
// kernel runs one N, and keeping the other seven out of its instruction stream keeps the
// finishing block's code compact (inlined, the eight made the kernel 4x larger and each site ~5 us
// slower on an H200).
template <int N>
__device__ __noinline__ void write_mix(const float* m, float inv, const float* base, const float* scale, int iters,
                                       float hc_eps, float* mix) {
  const int lane = threadIdx.x & 31;
  if (lane < N)
    mix[lane] = pre_weight(m[lane], inv, scale[0], base[lane], hc_eps);
  else if (lane < 2 * N)
    mix[lane] = 2.0f * sigmoid(m[lane] * inv * scale[1] + base[lane]);
  if constexpr (N * N <= 32) {
    const int e = lane < N * N ? lane : 0;
    const float c = sinkhorn_lanes<N>(m[2 * N + e] * inv * scale[2] + base[2 * N + e], iters, hc_eps);
    if (lane < N * N) mix[2 * N + lane] = c;
  } else {
    float c[N * N];
#pragma unroll
    for (int e = 0; e < N * N; ++e) c[e] = m[2 * N + e] * inv * scale[2] + base[2 * N + e];
    sinkhorn<N>(c, iters, hc_eps);
#pragma unroll
    for (int e = 0; e < N * N; ++e)
      if ((2 * N + e) % 32 == lane) mix[2 * N + e] = c[e];
  }
}

__device__ void write_mix(const Site& a, const float* m, float inv, const float* base, const float* scale, float* mix) {
  const int it = a.sinkhorn_iters;
  const float e = a.hc_eps;
  switch (a.N) {
    case 1: return write_mix<1>(m, inv, base, scale, it, e, mix);
    case 2: return write_mix<2>(m, inv, base, scale, it, e, mix);
    case 3: return write_mix<3>(m, inv, base, scale, it, e, mix);
    case 4: return write_mix<4>(m, inv, base, scale, it, e, mix);
    case 5: return write_mix<5>(m, inv, base, scale, it, e, mix);
    case 6: return write_mix<6>(m, inv, base, scale, it, e, mix);
    case 7: return write_mix<7>(m, inv, base, scale, it, e, mix);
    default: return write_mix<8>(m, inv, base, scale, it, e, mix);
  }
}

// s = sum_j pre[j] * x[j*D + d .. + V] (the streams of one token).
template <int V>
__device__ void collapse(const float* x, const float (&pre)[kMaxStreams], int N, int D, int d, float (&s)[V]) {
#pragma unroll
  for (int v = 0; v < V; ++v) s[v] = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxStreams; ++j)
    if (j < N) {
      float xv[V];
      load(x + int64_t{j} * D + d, xv);
#pragma unroll
      for (int v = 0; v < V; ++v) s[v] = fmaf(pre[j], xv[v], s[v]);
    }
}

// One collapsing thread (tid < Threads, warps FirstWarp..) for tokens t0 .. t0+nt-1 of a.streams,
// into rows o0 .. of a.out: out = RMSNorm(sum_j pre[j] * stream_j) * norm_weight (none: 1), or
// without Normalise the sum itself (its bits: scaling by 1 * 1 is exact), with
// pre_of(t, pre) giving pre[0..N) of token t0 + t (0 past N). A thread keeps its first kHold
// vectors in registers and stores the rest (D > kHold * V * Threads) unscaled, to rescale after
// the norm. The arguments stay in the kernel's parameter space (a), not in registers.
template <int V, int Threads, int FirstWarp, bool Normalise, class PreOf>
__device__ void collapse_tokens(const Site& a, int t0, int o0, int nt, float* red, PreOf&& pre_of) {
  const int N = a.N, D = a.D, tid = threadIdx.x - 32 * FirstWarp, vectors = D / V;
  for (int t = 0; t < nt; ++t) {
    const float* x = a.streams + (t0 + t) * a.K;
    float* o = a.out + (o0 + t) * int64_t{D};
    float pre[kMaxStreams];
    pre_of(t, pre);
    float held[kHold][V], sq_out = 0.0f;
#pragma unroll
    for (int h = 0; h < kHold; ++h) {  // unconditional loads (of vector 0 past the end): all in flight at once
      const int i = tid + h * Threads;
      collapse(x, pre, N, D, i < vectors ? i * V : 0, held[h]);
#pragma unroll
      for (int v = 0; v < V; ++v) sq_out = i < vectors ? fmaf(held[h][v], held[h][v], sq_out) : sq_out;
    }
    for (int i = tid + kHold * Threads; i < vectors; i += Threads) {
      float s[V];
      collapse(x, pre, N, D, i * V, s);
#pragma unroll
      for (int v = 0; v < V; ++v) sq_out = fmaf(s[v], s[v], sq_out);
      store(o + i * V, s);
    }
    // The norm weights of the held vectors, asked for before the block-wide sum so that their
    // latency (L2: prefetched in phase 1) hides behind it.
    float w[kHold][V];
#pragma unroll
    for (int h = 0; h < kHold; ++h) {
      const int i = tid + h * Threads;
      if (a.norm_weight) {
        load(a.norm_weight + (i < vectors ? i * V : 0), w[h]);
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v) w[h][v] = 1.0f;
      }
    }
    const float sum_sq = collapse_sum<Threads, FirstWarp>(sq_out, red);  // block-wide: every thread takes part
    const float inv_out = Normalise ? inv_rms(sum_sq, D, a.norm_eps) : 1.0f;
#pragma unroll
    for (int h = 0; h < kHold; ++h) {  // s * inv_out * norm_weight, as cpu::rms_norm
      const int i = tid + h * Threads;
      if (i < vectors) {
#pragma unroll
        for (int v = 0; v < V; ++v) held[h][v] = held[h][v] * inv_out * w[h][v];
        store(o + i * V, held[h]);
      }
    }
    for (int i = tid + kHold * Threads; i < vectors; i += Threads) {  // its own stores above
      float s[V], wv[V];
#pragma unroll
      for (int v = 0; v < V; ++v) s[v] = o[i * V + v];
      if (a.norm_weight) load(a.norm_weight + i * V, wv);
#pragma unroll
      for (int v = 0; v < V; ++v) s[v] = a.norm_weight ? s[v] * inv_out * wv[v] : s[v] * inv_out;
      store(o + i * V, s);
    }
  }
}

// Phase 2, in the group's last block: the logits m[t][r] from the partials (lane strides, then the
// warp tree: a fixed order), the streams' sums of squares, then mix and out as M says.
template <int V, Mode M>
__device__ void finish(const Site& a, int t0, int nt, float base_value, float scale_value) {
  constexpr bool Full = M != Mode::Head;
  __shared__ float m[kTokens][kMaxMix + 1];
  __shared__ float sq[kTokens];
  __shared__ float base[kMaxMix], scale[3];
  __shared__ float red[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int total = nt * a.rows;
  for (int i0 = warp * kRowsAtOnce; i0 < total; i0 += kWarps * kRowsAtOnce) {
    float s[kRowsAtOnce] = {};
#pragma unroll 4
    for (int k = lane; k < a.splits; k += 32)
#pragma unroll
      for (int u = 0; u < kRowsAtOnce; ++u) {
        const int i = i0 + u, t = i / a.rows, r = i % a.rows;
        if (i < total) s[u] += __ldcg(a.part + (t0 + t) * a.ld + int64_t{r} * a.splits + k);  // written this launch
      }
#pragma unroll
    for (int u = 0; u < kRowsAtOnce; ++u) {
      const float v = warp_sum(s[u]);
      const int i = i0 + u;
      if (lane == 0 && i < total) m[i / a.rows][i % a.rows] = v;
    }
  }
  const int bias_count = Full ? 2 * a.N + a.N * a.N : a.N;
  if (threadIdx.x < bias_count) base[threadIdx.x] = base_value;
  if (threadIdx.x < (Full ? 3 : 1)) scale[threadIdx.x] = scale_value;
  __syncthreads();  // m is complete and the partials are read: out and mix may be written
  for (int t = 0; t < nt; ++t) {
    float v = 0.0f;
    if (a.rows == a.fn_rows) {  // toy shapes: the squares were not a row
      const float* x = a.streams + (t0 + t) * a.K;
      for (int64_t i = threadIdx.x; i < a.K; i += kThreads) v = fmaf(x[i], x[i], v);
      v = block_sum(v, red);
    }
    if (threadIdx.x == 0) sq[t] = a.rows == a.fn_rows ? v : m[t][a.rows - 1];
  }
  __syncthreads();
  if (warp < kMixWarps) {
    if (Full && warp < nt)
      write_mix(a, m[warp], inv_rms(sq[warp], a.K, a.norm_eps), base, scale,
                a.mix + (t0 + warp) * int64_t{2 * a.N + a.N * a.N});
    return;
  }
  if constexpr (M != Mode::Map)
    collapse_tokens<V, kCollapseThreads, kMixWarps, true>(
        a, t0, t0, nt, red, [&](int t, float (&pre)[kMaxStreams]) {
          const float inv = inv_rms(sq[t], a.K, a.norm_eps);
#pragma unroll
          for (int j = 0; j < kMaxStreams; ++j)
            pre[j] = j < a.N ? pre_weight(m[t][j], inv, scale[0], base[j], a.hc_eps) : 0.0f;
        });
}

template <int V, Mode M>
__global__ void __launch_bounds__(kThreads) site_kernel(Site a) {
  constexpr bool Full = M != Mode::Head;
  // Weights first, before the wait for the previous kernel (none is written during a step): fn's
  // first values, and the small parameters the finishing block needs (base and scale in
  // registers, the norm weights into L2).
  float first_fn[kRowsPerWarp][V];
  first_fn_values<V>(a, first_fn);
  const int bias_count = Full ? 2 * a.N + a.N * a.N : a.N;
  const float base_value = threadIdx.x < bias_count ? a.base[threadIdx.x] : 0.0f;
  const float scale_value = threadIdx.x < (Full ? 3 : 1) ? a.scale[threadIdx.x] : 0.0f;
  if (a.norm_weight && blockIdx.y == 0) prefetch_l2(a.norm_weight, a.D);
  follow_previous_kernel();
  if constexpr (M == Mode::Map)
    if (!a.part) a.part = g_map_partials;
  const int t0 = blockIdx.y * kTokens, nt = a.n - t0 < kTokens ? a.n - t0 : kTokens;
  partial_sums<V>(a, t0, nt, first_fn);
  if (arrived_last(&g_arrivals[blockIdx.y])) finish<V, M>(a, t0, nt, base_value, scale_value);
}

// hc_collapse, block b: token first + b of a.streams into row b of a.out (a's streams, N, D, K,
// norm_weight, norm_eps and out), with pre from mix [n, 2N + N*N] or, mix null, stream 0: the
// collapse with pre = (1, 0, ..), where fmaf(1, x, 0) = x and fmaf(0, y, x) = x for finite y, so its
// bits pass through as the reference's do. Without Normalise: hc_sum (no norm).
template <int V, bool Normalise>
__global__ void __launch_bounds__(kCollapseThreads) collapse_kernel(Site a, const float* mix, int first) {
  follow_previous_kernel();
  __shared__ float red[kCollapseWarps];
  const int t = first + static_cast<int>(blockIdx.x);
  const float* pre_row = mix ? mix + int64_t{t} * (2 * a.N + a.N * a.N) : nullptr;
  collapse_tokens<V, kCollapseThreads, 0, Normalise>(a, t, static_cast<int>(blockIdx.x), 1, red, [&](int, float (&pre)[kMaxStreams]) {
#pragma unroll
    for (int j = 0; j < kMaxStreams; ++j) pre[j] = j >= a.N ? 0.0f : pre_row ? pre_row[j] : j == 0 ? 1.0f : 0.0f;
  });
}

// One thread per (token, d): all N new stream values from the N old ones.
__global__ void __launch_bounds__(kPostThreads)
    post_kernel(float* streams, int n, int N, int D, const float* mix, const float* sublayer) {
  follow_previous_kernel();
  const int64_t count = int64_t{n} * D;
  const int M = 2 * N + N * N;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / D, d = i % D;
    const float* post = mix + t * M + N;
    const float* comb = post + N;
    float* s = streams + t * N * D + d;
    // Loops to kMaxStreams with a bound check keep old[] in registers.
    float old[kMaxStreams];
#pragma unroll
    for (int j = 0; j < kMaxStreams; ++j) old[j] = j < N ? s[int64_t{j} * D] : 0.0f;
    const float sub = sublayer[t * D + d];
    for (int k = 0; k < N; ++k) {
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < kMaxStreams; ++j)
        if (j < N) acc = fmaf(comb[j * N + k], old[j], acc);
      s[int64_t{k} * D] = post[k] * sub + acc;
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// site_kernel in mode M; the split fields of `a` are filled in here.
template <Mode M>
cudaError_t launch(Site a, cudaStream_t stream) {
  constexpr bool Full = M != Mode::Head;
  a.rows = a.fn_rows + 1;
  if constexpr (M == Mode::Map) {
    a.part = nullptr, a.ld = kMapScratch / a.n;  // null: the scratch (site_kernel), no host call to find it
  } else {
    a.part = a.out, a.ld = a.D;
  }
  if (a.rows > a.ld) {  // toy shapes: one split, logits only (mix holds fn_rows per token, out D >= N)
    a.rows = a.fn_rows;
    a.part = Full ? a.mix : a.out;
    a.ld = Full ? a.fn_rows : a.D;
  }
  // 16-byte accesses (to fn, the streams, out and the norm weights) where all are aligned.
  const bool vec = a.D % 4 == 0 && aligned16(a.streams) && aligned16(a.fn) && (!a.out || aligned16(a.out)) &&
                   (!a.norm_weight || aligned16(a.norm_weight));
  // The most splits that fit in a row of ld, at whole vectors per lane.
  const int64_t max_splits = a.ld / a.rows, step = 32 * (vec ? 4 : 1);
  a.chunk = ((a.K + max_splits - 1) / max_splits + step - 1) / step * step;
  a.splits = static_cast<int>((a.K + a.chunk - 1) / a.chunk);
  const dim3 grid(a.splits, (a.n + kTokens - 1) / kTokens);
  return vec ? launch_dependent(site_kernel<4, M>, grid, dim3(kThreads), 0, stream, a)
             : launch_dependent(site_kernel<1, M>, grid, dim3(kThreads), 0, stream, a);
}

bool valid_shape(const float* streams, int n, int N, int D) {
  return streams && n >= 0 && N >= 1 && N <= kMaxStreams && D >= 1 && int64_t{N} * D <= 0x7fffffff;
}

// Arguments hc_pre, hc_map and hc_head need (out: their output, input / mix / out).
bool valid(const float* streams, int n, int N, int D, const float* fn, const float* base, const float* scale,
           const float* out) {
  return valid_shape(streams, n, N, D) && fn && base && scale && out && n <= kMaxGroups * kTokens;
}

}  // namespace

cudaError_t hc_pre(const float* streams, int n, int N, int D, const float* fn, const float* base, const float* scale,
                   int sinkhorn_iters, float hc_eps, float norm_eps, const float* norm_weight, float* mix, float* input,
                   cudaStream_t stream) {
  if (!valid(streams, n, N, D, fn, base, scale, input) || !mix || sinkhorn_iters < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const Site a{streams, n, N, D, int64_t{N} * D, fn, (2 + N) * N, 0, 0, 0, nullptr, 0, base, scale,
               sinkhorn_iters, hc_eps, norm_eps, norm_weight, mix, input};
  return launch<Mode::Pre>(a, stream);
}

cudaError_t hc_map(const float* streams, int n, int N, int D, const float* fn, const float* base, const float* scale,
                   int sinkhorn_iters, float hc_eps, float norm_eps, float* mix, cudaStream_t stream) {
  if (!valid(streams, n, N, D, fn, base, scale, mix) || sinkhorn_iters < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const Site a{streams, n, N, D, int64_t{N} * D, fn, (2 + N) * N, 0, 0, 0, nullptr, 0, base, scale,
               sinkhorn_iters, hc_eps, norm_eps, nullptr, mix, nullptr};
  return launch<Mode::Map>(a, stream);
}

namespace {

// collapse_kernel over rows [first, n), with the norm (hc_collapse) or without (hc_sum).
template <bool Normalise>
cudaError_t collapse(const float* streams, int n, int N, int D, const float* mix, int first, const float* norm_weight,
                     float norm_eps, float* out, cudaStream_t stream) {
  if (!valid_shape(streams, n, N, D) || !out || first < 0 || first > n) return cudaErrorInvalidValue;
  if (n == first) return cudaSuccess;
  const Site a{streams, n, N, D, int64_t{N} * D, nullptr, 0, 0, 0, 0, nullptr, 0, nullptr, nullptr,
               0, 0.0f, norm_eps, norm_weight, nullptr, out};
  const bool vec = D % 4 == 0 && aligned16(streams) && aligned16(out) && (!norm_weight || aligned16(norm_weight));
  const dim3 grid(static_cast<unsigned>(n - first));
  return vec ? launch_dependent(collapse_kernel<4, Normalise>, grid, dim3(kCollapseThreads), 0, stream, a, mix, first)
             : launch_dependent(collapse_kernel<1, Normalise>, grid, dim3(kCollapseThreads), 0, stream, a, mix, first);
}

}  // namespace

cudaError_t hc_collapse(const float* streams, int n, int N, int D, const float* mix, int first,
                        const float* norm_weight, float norm_eps, float* out, cudaStream_t stream) {
  return collapse<true>(streams, n, N, D, mix, first, norm_weight, norm_eps, out, stream);
}

cudaError_t hc_sum(const float* streams, int n, int N, int D, const float* mix, int first, float* out,
                   cudaStream_t stream) {
  return collapse<false>(streams, n, N, D, mix, first, nullptr, 0.0f, out, stream);
}

cudaError_t hc_post(float* streams, int n, int N, int D, const float* mix, const float* sublayer, cudaStream_t stream) {
  if (!streams || !mix || !sublayer || n < 0 || N < 1 || N > kMaxStreams || D < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int64_t count = int64_t{n} * D;
  const int64_t blocks = (count + kPostThreads - 1) / kPostThreads;
  return launch_dependent(post_kernel, dim3(static_cast<unsigned>(blocks < 8192 ? blocks : 8192)), dim3(kPostThreads),
                          0, stream, streams, n, N, D, mix, sublayer);
}

cudaError_t hc_head(const float* streams, int n, int N, int D, const float* fn, const float* base, const float* scale,
                    float hc_eps, float norm_eps, const float* norm_weight, float* out, cudaStream_t stream) {
  if (!valid(streams, n, N, D, fn, base, scale, out) || D < N) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const Site a{streams, n, N, D, int64_t{N} * D, fn, N, 0, 0, 0, nullptr, 0, base, scale,
               0, hc_eps, norm_eps, norm_weight, nullptr, out};
  return launch<Mode::Head>(a, stream);
}

}  // namespace frank::cuda
