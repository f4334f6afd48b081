// Manifold-constrained hyper-connections (contract in ops.cuh): hc_pre, hc_post, hc_head.
//
// hc_pre and hc_head are two kernels each:
//   1. partial_kernel (split-K): fn · streams[t] is (2+N)*N rows (hc_head: N) of K = N*D values,
//      24 x 16384 (1.5 MB) at the real shape. One block takes one chunk of K columns of every row
//      for a group of up to kTokens tokens, so ~128 blocks read the matrix at once, each value once
//      per group; the streams' sum of squares (for their RMS) rides along as one more row. Partial
//      sums go to scratch: the op's own [n, D] output (input / out), as [t][row][split].
//   2. finish_kernel, one block per token: sums each row's partials in a fixed order (so a result
//      is the same on every run), then m = fn · (x * inv) = inv * (fn · x). In hc_pre warp 0 makes
//      mix (sigmoids, Sinkhorn) while the other warps collapse the streams with pre; all then
//      RMS-normalise the collapsed row, which stays in registers.
// Toy shapes whose output row cannot hold the partials of even one split (D < rows + 1) take one
// split without the sum of squares, into mix (hc_pre) or out (hc_head, D >= N); the finish kernel
// then sums the squares itself.
#include <cstdint>

#include "frank/cuda/ops.cuh"
#include "frank/cuda/launch.cuh"
#include "frank/cuda/warp_reduce.cuh"

namespace frank::cuda {
namespace {

constexpr unsigned kAll = 0xffffffffu;
constexpr int kMaxStreams = 8;                                   // largest N (Sinkhorn: N*N <= 64 = 2 per lane)
constexpr int kMaxRows = (2 + kMaxStreams) * kMaxStreams + 1;    // logit rows + the sum of squares
constexpr int kTokens = 8;                                       // tokens per partial block
constexpr int kRowsPerWarp = 32 / kTokens;                       // a warp's sums fill its 32 lanes
constexpr int kMaxPartialWarps = 16;
constexpr int kFinishThreads = 512;
constexpr int kHold = 4;                                         // collapse vectors a thread keeps in registers
constexpr int kPostThreads = 256;

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

struct Partials {
  const float* streams;  // [n, K]
  int n;
  int64_t K;
  const float* fn;  // [fn_rows, K]
  int fn_rows;
  int rows;        // fn_rows, plus one when the sum of squares is a row
  int64_t chunk;   // columns per split: a multiple of 32 * V
  int splits;
  float* part;  // part[t*ld + r*splits + s]
  int64_t ld;
};

// Block (s, g): for tokens g*kTokens.. and columns [s*chunk, (s+1)*chunk), the partial dot
// products of every fn row (row fn_rows: x · x). A warp takes kRowsPerWarp rows at a time; each
// lane accumulates its columns for kRowsPerWarp x kTokens sums, which transpose_sum reduces.
template <int V>
__global__ void __launch_bounds__(kMaxPartialWarps * 32) partial_kernel(Partials p) {
  follow_previous_kernel();
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int s = blockIdx.x, t0 = blockIdx.y * kTokens;
  const int nt = p.n - t0 < kTokens ? p.n - t0 : kTokens;
  const int64_t c0 = s * p.chunk, c1 = c0 + p.chunk < p.K ? c0 + p.chunk : p.K;
  const float* x = p.streams + t0 * p.K;
  for (int r0 = warp * kRowsPerWarp; r0 < p.rows; r0 += warps * kRowsPerWarp) {
    float acc[kRowsPerWarp * kTokens] = {};
    for (int64_t c = c0 + lane * V; c < c1; c += 32 * V) {
      float xv[kTokens][V] = {};
#pragma unroll
      for (int t = 0; t < kTokens; ++t)
        if (t < nt) load(x + t * p.K + c, xv[t]);
#pragma unroll
      for (int b = 0; b < kRowsPerWarp; ++b) {
        const int r = r0 + b;
        if (r >= p.rows) break;
        float fv[V];
        if (r < p.fn_rows) load(p.fn + r * p.K + c, fv);
#pragma unroll
        for (int t = 0; t < kTokens; ++t)
#pragma unroll
          for (int v = 0; v < V; ++v) {
            const float f = r < p.fn_rows ? fv[v] : xv[t][v];  // row fn_rows: the sum of squares
            acc[b * kTokens + t] = fmaf(f, xv[t][v], acc[b * kTokens + t]);
          }
      }
    }
    const float sum = reduce_scatter<32>(acc, threadIdx.x % 32);  // lane: row r0 + lane / kTokens, token lane % kTokens
    const int r = r0 + lane / kTokens, t = lane % kTokens;
    if (r < p.rows && t < nt) p.part[(t0 + t) * p.ld + int64_t{r} * p.splits + s] = sum;
  }
}

// The sum, in the order first, first + step, ... (N terms; the reference's order), of elements of
// an N x N matrix held by a warp: element e in lane e % 32, slot e / 32. `two`: slot 1 is in use.
template <class T>
__device__ T line_sum(const float (&c)[2], int first, int step, int N, bool two) {
  T s = 0;
#pragma unroll
  for (int i = 0; i < kMaxStreams; ++i) {
    if (i >= N) break;
    const int e = first + i * step;
    const float lo = __shfl_sync(kAll, c[0], e & 31), hi = two ? __shfl_sync(kAll, c[1], e & 31) : 0.0f;
    s += e < 32 ? lo : hi;
  }
  return s;
}

__device__ float line_max(const float (&c)[2], int first, int N, bool two) {
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kMaxStreams; ++i) {
    if (i >= N) break;
    const int e = first + i;
    const float lo = __shfl_sync(kAll, c[0], e & 31), hi = two ? __shfl_sync(kAll, c[1], e & 31) : 0.0f;
    mx = fmaxf(mx, e < 32 ? lo : hi);
  }
  return mx;
}

// engine::sinkhorn on the N x N matrix c (row j = source stream) held by the warp as in line_sum,
// every lane normalising its own elements; sums and divisions as in the reference.
__device__ void sinkhorn(float (&c)[2], int N, int iters, float eps) {
  const int lane = threadIdx.x & 31;
  const int slots = N * N > 32 ? 2 : 1;  // warp-uniform
  const bool two = slots == 2;
  int row[2], col[2];
  bool valid[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int e = lane + 32 * i;
    row[i] = e / N, col[i] = e % N, valid[i] = e < N * N;
  }
  // Row softmax (cpu::softmax: a double sum and division), plus eps.
  float mx[2] = {}, sum[2] = {};
#pragma unroll
  for (int i = 0; i < 2; ++i)
    if (i < slots) mx[i] = line_max(c, row[i] * N, N, two);
#pragma unroll
  for (int i = 0; i < 2; ++i) c[i] = valid[i] ? expf(c[i] - mx[i]) : 0.0f;
#pragma unroll
  for (int i = 0; i < 2; ++i)
    if (i < slots) sum[i] = static_cast<float>(c[i] / line_sum<double>(c, row[i] * N, 1, N, two));
#pragma unroll
  for (int i = 0; i < 2; ++i) c[i] = valid[i] ? sum[i] + eps : 0.0f;
  // Then columns; then (iters - 1) x (rows, columns). All sums are taken before any division.
  for (int it = 0; it < 2 * iters - 1; ++it) {
    const bool rows = it % 2 == 1;
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (i < slots)
        sum[i] = rows ? line_sum<float>(c, row[i] * N, 1, N, two) : line_sum<float>(c, col[i], N, N, two);
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (valid[i]) c[i] /= sum[i] + eps;
  }
}

struct Finish {
  const float* streams;
  int N, D;
  const float* base;
  const float* scale;
  int sinkhorn_iters;  // hc_pre only
  float hc_eps, norm_eps;
  const float* norm_weight;
  const float* part;  // from partial_kernel: part[t*ld + r*splits + s]
  int64_t ld;
  int rows, splits;
  bool sq_in_part;  // row rows - 1 is the streams' sum of squares
  float* mix;       // [n, 2N + N*N], hc_pre only; may hold part
  float* out;       // [n, D]; may hold part
};

// The biases and scales warp 0 of hc_pre's finish block needs for its lane of mix: loaded before
// the partials are summed, so that their latency is not added to Sinkhorn's.
struct MixBias {
  float post, comb[2], scale_post, scale_comb;
};

__device__ MixBias load_mix_bias(const Finish& a) {
  const int N = a.N, lane = threadIdx.x & 31;
  MixBias b{lane < N ? a.base[N + lane] : 0.0f, {}, a.scale[1], a.scale[2]};
  for (int i = 0; i < 2; ++i) b.comb[i] = lane + 32 * i < N * N ? a.base[2 * N + lane + 32 * i] : 0.0f;
  return b;
}

// Warp 0 of hc_pre's finish block: mix[t] = [pre | post | Sinkhorn(comb)] from the logits m.
__device__ void write_mix(const Finish& a, const MixBias& b, const float* m, float inv,
                          const float (&pre)[kMaxStreams]) {
  const int N = a.N, lane = threadIdx.x & 31;
  float* mix = a.mix + blockIdx.x * int64_t{2 * N + N * N};
  if (lane < N) {
    float p = 0.0f;  // pre[lane] without dynamic indexing, which would put pre in local memory
#pragma unroll
    for (int j = 0; j < kMaxStreams; ++j)
      if (j == lane) p = pre[j];
    mix[lane] = p;
    mix[N + lane] = 2.0f * sigmoid(m[N + lane] * inv * b.scale_post + b.post);
  }
  float c[2];
  for (int i = 0; i < 2; ++i) {
    const int e = lane + 32 * i;
    c[i] = e < N * N ? m[2 * N + e] * inv * b.scale_comb + b.comb[i] : 0.0f;
  }
  sinkhorn(c, N, a.sinkhorn_iters, a.hc_eps);
  for (int i = 0; i < 2; ++i)
    if (lane + 32 * i < N * N) mix[2 * N + lane + 32 * i] = c[i];
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

// One block per token: the logits from their partials, mix (Full), and
// out = RMSNorm(sum_j pre[j] * stream_j) * norm_weight.
template <int V, bool Full>
__global__ void __launch_bounds__(kFinishThreads) finish_kernel(Finish a) {
  follow_previous_kernel();
  __shared__ float m[kMaxRows];
  __shared__ float red[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int N = a.N, D = a.D;
  const int64_t K = int64_t{N} * D;
  const float* x = a.streams + blockIdx.x * K;
  const float* part = a.part + blockIdx.x * a.ld;
  const bool mixer = Full && warp == 0;  // makes mix while the others collapse
  MixBias bias{};
  if (mixer) bias = load_mix_bias(a);
  float base[kMaxStreams];
#pragma unroll
  for (int j = 0; j < kMaxStreams; ++j) base[j] = j < N ? a.base[j] : 0.0f;
  const float scale = a.scale[0];
  for (int r = warp; r < a.rows; r += warps) {  // a fixed order: lane strides, then the warp tree
    const float* row = part + int64_t{r} * a.splits;
    float s = 0.0f;
    for (int i0 = lane; i0 < a.splits; i0 += 4 * 32) {  // 4 loads in flight per lane
      float v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = i0 + 32 * u < a.splits ? row[i0 + 32 * u] : 0.0f;
#pragma unroll
      for (int u = 0; u < 4; ++u) s += v[u];
    }
    s = warp_sum(s);
    if (lane == 0) m[r] = s;
  }
  __syncthreads();  // m is complete and the partials are read: out and mix may be written
  float sq;
  if (a.sq_in_part) {
    sq = m[a.rows - 1];
  } else {
    float v = 0.0f;
    for (int64_t i = threadIdx.x; i < K; i += blockDim.x) v = fmaf(x[i], x[i], v);
    sq = block_sum(v, red);
  }
  const float inv = 1.0f / sqrtf(sq / static_cast<float>(K) + a.norm_eps);
  float pre[kMaxStreams];
#pragma unroll
  for (int j = 0; j < kMaxStreams; ++j) pre[j] = j < N ? sigmoid(m[j] * inv * scale + base[j]) + a.hc_eps : 0.0f;

  // Each collapsing thread keeps its first kHold vectors in registers and stores the rest
  // (D > kHold * V * threads) unscaled, to rescale below.
  const int first = Full ? 32 : 0, count = blockDim.x - first, tid = threadIdx.x - first;
  const int vectors = D / V;
  float* o = a.out + blockIdx.x * int64_t{D};
  float held[kHold][V], sq_out = 0.0f;
  if (mixer) {
    write_mix(a, bias, m, inv, pre);
  } else {
#pragma unroll
    for (int h = 0; h < kHold; ++h) {
      const int i = tid + h * count;
      if (i < vectors) {
        collapse(x, pre, N, D, i * V, held[h]);
#pragma unroll
        for (int v = 0; v < V; ++v) sq_out = fmaf(held[h][v], held[h][v], sq_out);
      }
    }
    for (int i = tid + kHold * count; i < vectors; i += count) {
      float s[V];
      collapse(x, pre, N, D, i * V, s);
#pragma unroll
      for (int v = 0; v < V; ++v) sq_out = fmaf(s[v], s[v], sq_out);
      store(o + i * V, s);
    }
  }
  const float inv_out = 1.0f / sqrtf(block_sum(sq_out, red) / static_cast<float>(D) + a.norm_eps);
  if (mixer) return;
  auto finish = [&](int i, float (&s)[V]) {  // s * inv_out * norm_weight, as cpu::rms_norm
    float w[V];
    if (a.norm_weight) load(a.norm_weight + i * V, w);
#pragma unroll
    for (int v = 0; v < V; ++v) {
      s[v] *= inv_out;
      if (a.norm_weight) s[v] *= w[v];
    }
    store(o + i * V, s);
  };
#pragma unroll
  for (int h = 0; h < kHold; ++h)
    if (tid + h * count < vectors) finish(tid + h * count, held[h]);
  for (int i = tid + kHold * count; i < vectors; i += count) {  // this thread's own stores above
    float s[V];
#pragma unroll
    for (int v = 0; v < V; ++v) s[v] = o[i * V + v];
    finish(i, s);
  }
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

// Both kernels of hc_pre (Full) or hc_head, for fn [fn_rows, N*D]; a.part and the split fields
// are filled in here.
template <bool Full>
cudaError_t launch(Finish a, int n, const float* fn, int fn_rows, cudaStream_t stream) {
  const int64_t K = int64_t{a.N} * a.D;
  const int V = K % 4 == 0 && aligned16(a.streams) && aligned16(fn) ? 4 : 1;
  Partials p{a.streams, n, K, fn, fn_rows, fn_rows + 1, 0, 0, a.out, a.D};
  if (p.rows > a.D) {  // toy shapes: one split, logits only (mix holds fn_rows per token, out D >= N)
    p.rows = fn_rows;
    p.part = Full ? a.mix : a.out;
    p.ld = Full ? fn_rows : a.D;
  }
  // The most splits that fit in a row of ld, at whole vectors per lane.
  const int64_t max_splits = p.ld / p.rows, step = 32 * V;
  p.chunk = ((K + max_splits - 1) / max_splits + step - 1) / step * step;
  p.splits = static_cast<int>((K + p.chunk - 1) / p.chunk);
  const int warps = (p.rows + kRowsPerWarp - 1) / kRowsPerWarp;
  const dim3 grid(p.splits, (n + kTokens - 1) / kTokens);
  const int threads = 32 * (warps < kMaxPartialWarps ? warps : kMaxPartialWarps);
  if (V == 4) {
    if (const cudaError_t e = launch_dependent(partial_kernel<4>, dim3(grid), dim3(threads), 0, stream, p)) return e;
  } else {
    if (const cudaError_t e = launch_dependent(partial_kernel<1>, dim3(grid), dim3(threads), 0, stream, p)) return e;
  }
  if (const cudaError_t e = cudaGetLastError()) return e;

  a.part = p.part, a.ld = p.ld, a.rows = p.rows, a.splits = p.splits, a.sq_in_part = p.rows > fn_rows;
  if (a.D % 4 == 0 && aligned16(a.streams) && aligned16(a.out) && (!a.norm_weight || aligned16(a.norm_weight))) {
    if (const cudaError_t e = launch_dependent(finish_kernel<4, Full>, dim3(n), dim3(kFinishThreads), 0, stream, a))
      return e;
  } else {
    if (const cudaError_t e = launch_dependent(finish_kernel<1, Full>, dim3(n), dim3(kFinishThreads), 0, stream, a))
      return e;
  }
  return cudaGetLastError();
}

// Arguments both hc_pre and hc_head need.
bool valid(const float* streams, int n, int N, int D, const float* fn, const float* base, const float* scale,
           const float* out) {
  return streams && fn && base && scale && out && n >= 0 && n <= 65535 * kTokens && N >= 1 && N <= kMaxStreams &&
         D >= 1 && int64_t{N} * D <= 0x7fffffff;
}

}  // namespace

cudaError_t hc_pre(const float* streams, int n, int N, int D, const float* fn, const float* base, const float* scale,
                   int sinkhorn_iters, float hc_eps, float norm_eps, const float* norm_weight, float* mix, float* input,
                   cudaStream_t stream) {
  if (!valid(streams, n, N, D, fn, base, scale, input) || !mix || sinkhorn_iters < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const Finish a{streams, N, D, base, scale, sinkhorn_iters, hc_eps, norm_eps, norm_weight, nullptr, 0, 0, 0, false,
                 mix, input};
  return launch<true>(a, n, fn, (2 + N) * N, stream);
}

cudaError_t hc_post(float* streams, int n, int N, int D, const float* mix, const float* sublayer, cudaStream_t stream) {
  if (!streams || !mix || !sublayer || n < 0 || N < 1 || N > kMaxStreams || D < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int64_t count = int64_t{n} * D;
  const int64_t blocks = (count + kPostThreads - 1) / kPostThreads;
  if (const cudaError_t e = launch_dependent(post_kernel, dim3(static_cast<unsigned>(blocks < 8192 ? blocks : 8192)),
                                             dim3(kPostThreads), 0, stream, streams, n, N, D, mix, sublayer))
    return e;
  return cudaGetLastError();
}

cudaError_t hc_head(const float* streams, int n, int N, int D, const float* fn, const float* base, const float* scale,
                    float hc_eps, float norm_eps, const float* norm_weight, float* out, cudaStream_t stream) {
  if (!valid(streams, n, N, D, fn, base, scale, out) || D < N) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const Finish a{streams, N, D, base, scale, 0, hc_eps, norm_eps, norm_weight, nullptr, 0, 0, 0, false, nullptr, out};
  return launch<false>(a, n, fn, N, stream);
}

}  // namespace frank::cuda
