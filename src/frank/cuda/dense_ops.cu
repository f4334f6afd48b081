// Dense ops of the forward pass (contract in ops.cuh): linear, rms_norm, rope, scale, embed_streams.
//
// linear is a GEMV for a few tokens: a warp owns R output rows and walks them once with 16-byte
// loads, applying every weight it loads to up to kTokens tokens held in registers, so for decode
// (n <= 8) each weight element is read once. More tokens are taken in groups of kTokens; a group
// re-reads the warp's rows, which the previous group has just brought into L1/L2.
#include <algorithm>
#include <cstdint>

#include "frank/cuda/ops.cuh"

namespace frank::cuda {
namespace {

constexpr int kTokens = 8;       // tokens per pass over a weight row
constexpr int kLinearWarps = 8;  // warps per linear block
constexpr int kThreads = 256;    // threads per block of the element-wise kernels
constexpr int kNormThreads = 512;

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

// V consecutive elements as fp32. V = 1 is a plain load; otherwise one 16-byte load (4 fp32 or
// 8 bf16) or, for 8 activations, two. bf16 is the high half of an fp32, element 2i in the low
// half of word i (little-endian).
__device__ void load(const float* p, float (&v)[1]) { v[0] = __ldg(p); }
__device__ void load(const uint16_t* p, float (&v)[1]) { v[0] = __uint_as_float(uint32_t{__ldg(p)} << 16); }
__device__ void load(const float* p, float (&v)[4]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p));
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
}
__device__ void load(const float* p, float (&v)[8]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ void load(const uint16_t* p, float (&v)[8]) {
  const uint4 a = __ldg(reinterpret_cast<const uint4*>(p));
  const uint32_t words[4] = {a.x, a.y, a.z, a.w};
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __uint_as_float(words[i] << 16);
    v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

// y[t, o] for the warp's R rows (o = row0 ..), all tokens: lane l takes elements l*V .. of each
// 32*V-wide step of the row, then the warp sums the lanes' partial dot products.
template <class W, int V, int R>
__global__ void __launch_bounds__(kLinearWarps * 32)
    linear_kernel(const float* __restrict__ x, int64_t ldx, int n, const W* __restrict__ w, int64_t out, int64_t in,
                  float* __restrict__ y, int64_t ldy) {
  const int lane = threadIdx.x & 31;
  const int64_t row0 = (int64_t{blockIdx.x} * kLinearWarps + threadIdx.x / 32) * R;
  if (row0 >= out) return;
  // Rows past the end read the last row again; their sums are not written.
  const W* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = w + (row0 + r < out ? row0 + r : out - 1) * in;
  for (int t0 = 0; t0 < n; t0 += kTokens) {
    const int nt = n - t0 < kTokens ? n - t0 : kTokens;
    const float* xt = x + t0 * ldx;
    float acc[R][kTokens] = {};
    for (int64_t k = int64_t{lane} * V; k < in; k += 32 * V) {
      float wv[R][V];
#pragma unroll
      for (int r = 0; r < R; ++r) load(rows[r] + k, wv[r]);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (t >= nt) break;
        float xv[V];
        load(xt + t * ldx + k, xv);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int v = 0; v < V; ++v) acc[r][t] = fmaf(wv[r][v], xv[v], acc[r][t]);
      }
    }
    // Every lane ends with every sum; lane r*kTokens + t writes (row0 + r, t0 + t).
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        const float s = warp_sum(acc[r][t]);
        if (lane == r * kTokens + t && t < nt && row0 + r < out) y[(t0 + t) * ldy + row0 + r] = s;
      }
  }
}

template <class W, int V>
cudaError_t launch_linear(const float* x, int64_t ldx, int n, const void* w, int64_t out, int64_t in, float* y,
                          int64_t ldy, cudaStream_t stream) {
  // Four rows a warp divide the activation loads by four; worth it when enough warps remain to
  // keep the GPU's memory busy (out >= 8192 gives >= 2048 warps).
  const W* wt = static_cast<const W*>(w);
  if (V > 1 && out >= 8192) {
    const int64_t blocks = (out + 4 * kLinearWarps - 1) / (4 * kLinearWarps);
    linear_kernel<W, V, 4><<<static_cast<unsigned>(blocks), kLinearWarps * 32, 0, stream>>>(x, ldx, n, wt, out, in,
                                                                                             y, ldy);
  } else {
    const int64_t blocks = (out + kLinearWarps - 1) / kLinearWarps;
    linear_kernel<W, V, 1><<<static_cast<unsigned>(blocks), kLinearWarps * 32, 0, stream>>>(x, ldx, n, wt, out, in,
                                                                                             y, ldy);
  }
  return cudaGetLastError();
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Blocks for a grid-stride loop over `count` elements.
unsigned grid_for(int64_t count) {
  return static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 8192));
}

// One block per row: the sum of squares, then x * inv (* weight), in the reference's order.
__global__ void __launch_bounds__(kNormThreads) rms_norm_kernel(float* x, int width, const float* weight, float eps) {
  __shared__ float red[32];
  float* r = x + int64_t{blockIdx.x} * width;
  float sq = 0.0f;
  for (int i = threadIdx.x; i < width; i += blockDim.x) sq = fmaf(r[i], r[i], sq);
  const float inv = 1.0f / sqrtf(block_sum(sq, red) / static_cast<float>(width) + eps);
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    float v = r[i] * inv;
    if (weight) v *= weight[i];
    r[i] = v;
  }
}

// One thread per rotated pair (token, head, pair).
__global__ void rope_kernel(float* x, int n, int heads, int dim, const float* inv_freq, int pairs,
                            int64_t first_position, bool inverse) {
  const int64_t count = int64_t{n} * heads * pairs;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < count;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int i = static_cast<int>(idx % pairs);
    const int64_t head = idx / pairs;  // t * heads + h
    const int64_t t = head / heads;
    float* r = x + head * dim + dim - 2 * pairs;
    const float angle = inv_freq[i] * static_cast<float>(first_position + t);
    const float c = cosf(angle);
    const float s = inverse ? -sinf(angle) : sinf(angle);
    const float a = r[2 * i], b = r[2 * i + 1];
    r[2 * i] = a * c - b * s;
    r[2 * i + 1] = b * c + a * s;
  }
}

__global__ void scale_kernel(float* x, int64_t count, float s) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    x[i] *= s;
}

// One thread per (token, d): reads the embedding value once, writes it to all N streams.
__global__ void embed_streams_kernel(const int32_t* ids, int n, const float* table, int D, int N, float* streams) {
  const int64_t count = int64_t{n} * D;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / D, d = i % D;
    const float v = table[int64_t{ids[t]} * D + d];
    float* s = streams + t * N * D + d;
    for (int j = 0; j < N; ++j) s[int64_t{j} * D] = v;
  }
}

}  // namespace

cudaError_t linear(const float* x, int64_t ldx, int n, const void* w, WeightType wt, int64_t out, int64_t in, float* y,
                   int64_t ldy, cudaStream_t stream) {
  if (!x || !w || !y || n < 0 || out < 1 || in < 1 || ldx < in || ldy < out) return cudaErrorInvalidValue;
  if (wt != WeightType::F32 && wt != WeightType::BF16) return cudaErrorInvalidValue;
  if ((out + kLinearWarps - 1) / kLinearWarps > 0x7fffffff) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  // 16-byte loads need every weight row and activation row to start 16-byte aligned.
  const int64_t per16 = wt == WeightType::F32 ? 4 : 8;
  const bool vec = aligned16(w) && aligned16(x) && in % per16 == 0 && ldx % 4 == 0;
  if (wt == WeightType::F32)
    return vec ? launch_linear<float, 4>(x, ldx, n, w, out, in, y, ldy, stream)
               : launch_linear<float, 1>(x, ldx, n, w, out, in, y, ldy, stream);
  return vec ? launch_linear<uint16_t, 8>(x, ldx, n, w, out, in, y, ldy, stream)
             : launch_linear<uint16_t, 1>(x, ldx, n, w, out, in, y, ldy, stream);
}

cudaError_t rms_norm(float* x, int64_t rows, int width, const float* weight, float eps, cudaStream_t stream) {
  if (!x || rows < 0 || rows > 0x7fffffff || width < 1) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  rms_norm_kernel<<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(x, width, weight, eps);
  return cudaGetLastError();
}

cudaError_t rope(float* x, int n, int heads, int dim, const float* inv_freq, int pairs, int64_t first_position,
                 bool inverse, cudaStream_t stream) {
  if (!x || !inv_freq || n < 0 || heads < 1 || pairs < 1 || dim < 2 * pairs || first_position < 0)
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  rope_kernel<<<grid_for(int64_t{n} * heads * pairs), kThreads, 0, stream>>>(x, n, heads, dim, inv_freq, pairs,
                                                                             first_position, inverse);
  return cudaGetLastError();
}

cudaError_t scale(float* x, int64_t count, float s, cudaStream_t stream) {
  if (!x || count < 0) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  scale_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, count, s);
  return cudaGetLastError();
}

cudaError_t embed_streams(const int32_t* ids, int n, const float* table, int D, int N, float* streams,
                          cudaStream_t stream) {
  if (!ids || !table || !streams || n < 0 || D < 1 || N < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  embed_streams_kernel<<<grid_for(int64_t{n} * D), kThreads, 0, stream>>>(ids, n, table, D, N, streams);
  return cudaGetLastError();
}

}  // namespace frank::cuda
