// Manifold-constrained hyper-connections (contract in ops.cuh): hc_pre, hc_post, hc_head.
//
// hc_pre and hc_head are two kernels each:
//   1. logits: raw[t][r] = fn[r] · streams[t], one block per (fn row, group of kTokens tokens), so
//      the (2+N)*N rows of fn (1.5 MB at the real shape) are read by as many SMs at once;
//   2. finish: one block per token: the stream RMS (r = x * inv, so fn · r = inv * raw), the
//      sigmoids and Sinkhorn (one thread: 4x4), then the collapse and its RMSNorm.
// raw goes to the op's own output (mix for hc_pre, out for hc_head; both have room for it), which
// the finish kernel reads before it overwrites it, so the ops need no scratch.
#include <cstdint>

#include "frank/cuda/ops.cuh"

namespace frank::cuda {
namespace {

constexpr int kMaxStreams = 8;   // largest N (comb is N*N in one thread's registers)
constexpr int kTokens = 8;       // tokens per logits block
constexpr int kLogitThreads = 512;
constexpr int kFinishThreads = 512;
constexpr int kPostThreads = 256;

__device__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Sum over the block; every thread gets it. `red` holds 32 floats of shared memory.
__device__ float block_sum(float v, float* red) {
  const int warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = warp_sum(v);
  __syncthreads();  // red may still be read by a previous call
  if ((threadIdx.x & 31) == 0) red[warp] = v;
  __syncthreads();
  float s = 0.0f;
  for (int i = 0; i < warps; ++i) s += red[i];
  return s;
}

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// V consecutive floats: one 16-byte load for V = 4.
template <int V>
__device__ void load(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  } else {
    v[0] = __ldg(p);
  }
}

// raw[t*ld + r] = fn[r] · streams[t] (K = N*D values) for fn row r = blockIdx.x and the tokens
// of group blockIdx.y: each loaded fn value serves all the group's tokens.
template <int V>
__global__ void __launch_bounds__(kLogitThreads)
    logits_kernel(const float* __restrict__ streams, int n, int64_t K, const float* __restrict__ fn, float* raw,
                  int ld) {
  __shared__ float part[kLogitThreads / 32][kTokens];
  const float* f = fn + blockIdx.x * K;
  const int t0 = blockIdx.y * kTokens;
  const int nt = n - t0 < kTokens ? n - t0 : kTokens;
  const float* x = streams + t0 * K;
  float acc[kTokens] = {};
  for (int64_t k = int64_t{threadIdx.x} * V; k < K; k += int64_t{blockDim.x} * V) {
    float fv[V];
    load(f + k, fv);
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      if (t >= nt) break;
      float xv[V];
      load(x + t * K + k, xv);
#pragma unroll
      for (int v = 0; v < V; ++v) acc[t] = fmaf(fv[v], xv[v], acc[t]);
    }
  }
  const int warp = threadIdx.x / 32;
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    const float s = warp_sum(acc[t]);
    if ((threadIdx.x & 31) == 0) part[warp][t] = s;
  }
  __syncthreads();
  if (threadIdx.x < nt) {
    float s = 0.0f;
    for (int w = 0; w < kLogitThreads / 32; ++w) s += part[w][threadIdx.x];
    raw[(t0 + threadIdx.x) * int64_t{ld} + blockIdx.x] = s;
  }
}

// engine::sinkhorn on c [n*n] (row j = source stream), in the reference's order.
__device__ void sinkhorn(float* c, int n, int iters, float eps) {
  for (int j = 0; j < n; ++j) {
    float* row = c + j * n;
    float mx = row[0];
    for (int k = 1; k < n; ++k) mx = fmaxf(mx, row[k]);
    float sum = 0.0f;
    for (int k = 0; k < n; ++k) {
      row[k] = expf(row[k] - mx);
      sum += row[k];
    }
    for (int k = 0; k < n; ++k) row[k] = row[k] / sum + eps;
  }
  for (int it = 0; it < iters; ++it) {
    if (it > 0)  // the first round normalises columns only: the softmax made the rows
      for (int j = 0; j < n; ++j) {
        float sum = 0.0f;
        for (int k = 0; k < n; ++k) sum += c[j * n + k];
        for (int k = 0; k < n; ++k) c[j * n + k] /= sum + eps;
      }
    for (int k = 0; k < n; ++k) {
      float sum = 0.0f;
      for (int j = 0; j < n; ++j) sum += c[j * n + k];
      for (int j = 0; j < n; ++j) c[j * n + k] /= sum + eps;
    }
  }
}

struct HcArgs {
  const float* streams;
  int N, D;
  const float* base;
  const float* scale;
  int sinkhorn_iters;  // hc_pre only
  float hc_eps, norm_eps;
  const float* norm_weight;
  const float* raw;  // [n, ld]: fn · streams[t] from logits_kernel
  int ld;
  float* mix;  // [n, 2N + N*N], hc_pre only (null for hc_head); may be raw
  float* out;  // [n, D]; may be raw
};

// One block per token: the mapping from raw (Full: pre, post and Sinkhorn'd comb into mix; else
// pre only), then out = RMSNorm(sum_j pre[j] * stream_j) * norm_weight.
template <bool Full>
__global__ void __launch_bounds__(kFinishThreads) finish_kernel(HcArgs a) {
  __shared__ float red[32];
  __shared__ float pre[kMaxStreams];
  const int N = a.N, D = a.D;
  const int64_t K = int64_t{N} * D;
  const float* x = a.streams + blockIdx.x * K;
  float sq = 0.0f;
  for (int64_t i = threadIdx.x; i < K; i += blockDim.x) sq = fmaf(x[i], x[i], sq);
  const float inv = 1.0f / sqrtf(block_sum(sq, red) / static_cast<float>(K) + a.norm_eps);
  if (threadIdx.x == 0) {
    // m = fn · (x * inv) = inv * raw. Everything is read before mix (which may be raw) is written.
    const float* m = a.raw + blockIdx.x * int64_t{a.ld};
    for (int i = 0; i < N; ++i) pre[i] = sigmoid(m[i] * inv * a.scale[0] + a.base[i]) + a.hc_eps;
    if constexpr (Full) {
      float post[kMaxStreams], comb[kMaxStreams * kMaxStreams];
      for (int i = 0; i < N; ++i) post[i] = 2.0f * sigmoid(m[N + i] * inv * a.scale[1] + a.base[N + i]);
      for (int i = 0; i < N * N; ++i) comb[i] = m[2 * N + i] * inv * a.scale[2] + a.base[2 * N + i];
      sinkhorn(comb, N, a.sinkhorn_iters, a.hc_eps);
      float* mix = a.mix + blockIdx.x * int64_t{2 * N + N * N};
      for (int i = 0; i < N; ++i) mix[i] = pre[i], mix[N + i] = post[i];
      for (int i = 0; i < N * N; ++i) mix[2 * N + i] = comb[i];
    }
  }
  __syncthreads();  // pre is ready; raw has been read (out may be raw)
  float* o = a.out + blockIdx.x * int64_t{D};
  float sq_out = 0.0f;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float s = 0.0f;
    for (int j = 0; j < N; ++j) s = fmaf(pre[j], x[int64_t{j} * D + d], s);
    o[d] = s;
    sq_out = fmaf(s, s, sq_out);
  }
  const float inv_out = 1.0f / sqrtf(block_sum(sq_out, red) / static_cast<float>(D) + a.norm_eps);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {  // each thread rescales what it wrote
    float v = o[d] * inv_out;
    if (a.norm_weight) v *= a.norm_weight[d];
    o[d] = v;
  }
}

// One thread per (token, d): all N new stream values from the N old ones.
__global__ void __launch_bounds__(kPostThreads)
    post_kernel(float* streams, int n, int N, int D, const float* mix, const float* sublayer) {
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

// raw[t*ld + r] = fn[r] · streams[t] for r < rows.
cudaError_t launch_logits(const float* streams, int n, int64_t K, const float* fn, int rows, float* raw, int ld,
                          cudaStream_t stream) {
  const dim3 grid(rows, (n + kTokens - 1) / kTokens);
  if (K % 4 == 0 && aligned16(streams) && aligned16(fn))
    logits_kernel<4><<<grid, kLogitThreads, 0, stream>>>(streams, n, K, fn, raw, ld);
  else
    logits_kernel<1><<<grid, kLogitThreads, 0, stream>>>(streams, n, K, fn, raw, ld);
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
  const int M = 2 * N + N * N;
  if (const cudaError_t e = launch_logits(streams, n, int64_t{N} * D, fn, M, mix, M, stream)) return e;
  const HcArgs a{streams, N, D, base, scale, sinkhorn_iters, hc_eps, norm_eps, norm_weight, mix, M, mix, input};
  finish_kernel<true><<<n, kFinishThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t hc_post(float* streams, int n, int N, int D, const float* mix, const float* sublayer, cudaStream_t stream) {
  if (!streams || !mix || !sublayer || n < 0 || N < 1 || N > kMaxStreams || D < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int64_t count = int64_t{n} * D;
  const int64_t blocks = (count + kPostThreads - 1) / kPostThreads;
  post_kernel<<<static_cast<unsigned>(blocks < 8192 ? blocks : 8192), kPostThreads, 0, stream>>>(streams, n, N, D,
                                                                                                 mix, sublayer);
  return cudaGetLastError();
}

cudaError_t hc_head(const float* streams, int n, int N, int D, const float* fn, const float* base, const float* scale,
                    float hc_eps, float norm_eps, const float* norm_weight, float* out, cudaStream_t stream) {
  if (!valid(streams, n, N, D, fn, base, scale, out) || D < N) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  // raw goes to the first N values of each output row (D >= N).
  if (const cudaError_t e = launch_logits(streams, n, int64_t{N} * D, fn, N, out, D, stream)) return e;
  const HcArgs a{streams, N, D, base, scale, 0, hc_eps, norm_eps, norm_weight, out, D, nullptr, out};
  finish_kernel<false><<<n, kFinishThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace frank::cuda
