#pragma once
// engine::sinkhorn on one N x N matrix (N a template argument, so every index is a constant), run by
// one warp of hc_pre's finishing block for one token, in two forms: sinkhorn<N> holds the matrix
// whole in every lane's registers (each of the 2 * iters - 1 dependent normalisations is a few adds
// and multiplies, no shuffle latency); sinkhorn_lanes<N> holds one element a lane (N * N <= 32).
#include <cmath>

namespace frank::cuda {

// The hardware's approximate reciprocal (one MUFU.RCP, within 1 ulp; flushes subnormals, which a
// sum plus hc_eps never is). IEEE 1.0f / x is a multi-instruction sequence with a slow-path call,
// and Sinkhorn's 39 normalisations are one dependent chain: with it, Sinkhorn took ~9 us of a 22 us
// hc_pre site at the real shape (H200, ncu), on the kernel's critical path.
__device__ __forceinline__ float fast_reciprocal(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// Divides line i (a row when Rows, else a column) of c by its sum + eps. All N sums are taken
// first, in the reference's order; then one reciprocal per line and a product per element. The
// reference divides each element: c * rcp(s) is within 2 ulp of c / s, and Sinkhorn's
// normalisations do not amplify such differences (each rescales lines towards sums of one), so
// the mix stays within ~1e-6 of the reference, far inside the ops check's 1e-4.
template <int N, bool Rows>
__device__ __forceinline__ void normalise(float (&c)[N * N], float eps) {
  float inv[N];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) s += Rows ? c[i * N + k] : c[k * N + i];
    inv[i] = fast_reciprocal(s + eps);
  }
#pragma unroll
  for (int j = 0; j < N; ++j)
#pragma unroll
    for (int k = 0; k < N; ++k) c[j * N + k] *= Rows ? inv[j] : inv[k];
}

// Row softmax (cpu::softmax: exp(x - max), a double sum, a double division) plus eps, a column
// normalisation, then (iters - 1) x (rows, columns), eps in every denominator. The softmax takes
// one double reciprocal per row instead of a double division per element: x * (1 / sum) and
// x / sum differ by an ulp of a double, which the rounding to float almost never shows.
template <int N>
__device__ __forceinline__ void sinkhorn(float (&c)[N * N], int iters, float eps) {
#pragma unroll
  for (int j = 0; j < N; ++j) {
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < N; ++k) mx = fmaxf(mx, c[j * N + k]);
    double sum = 0.0;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      c[j * N + k] = expf(c[j * N + k] - mx);
      sum += c[j * N + k];
    }
    const double inv = 1.0 / sum;
#pragma unroll
    for (int k = 0; k < N; ++k) c[j * N + k] = static_cast<float>(c[j * N + k] * inv) + eps;
  }
  normalise<N, false>(c, eps);
  for (int it = 1; it < iters; ++it) {
    normalise<N, true>(c, eps);
    normalise<N, false>(c, eps);
  }
}

// sinkhorn<N> spread over a warp, lane e holding element e (N * N <= 32; lanes past N * N hold a
// copy of element 0, which no lane reads). Every line sum gathers the line's N elements by
// shuffles and adds them in the reference's order, so each element gets the same bits as in
// sinkhorn<N>. A normalisation's chain is a little longer (shuffle latency), but the code is one
// element's, and the finishing block runs it once per launch on whichever multiprocessor arrives
// last. At the real shape (N = 4, H200, clock64 in that block) the mix around sinkhorn<4> was 864
// instructions and took 5.2-6.3 us, against ~1 us of arithmetic; with sinkhorn_lanes<4> it takes
// 2.8-4.2 us and the decode step is 3-5 us shorter (bench/results/decode-h200-2026-11-30-s9/).
template <int N>
__device__ __forceinline__ float line_sum(float c, int first, int stride) {
  float s = 0.0f;
#pragma unroll
  for (int q = 0; q < N; ++q) s += __shfl_sync(0xffffffffu, c, first + q * stride);
  return s;
}

template <int N>
__device__ __forceinline__ float sinkhorn_lanes(float c, int iters, float eps) {
  static_assert(N * N <= 32, "one element a lane");
  const int lane = threadIdx.x & 31, e = lane < N * N ? lane : 0, row = e / N * N, col = e % N;
  float mx = -INFINITY;
#pragma unroll
  for (int q = 0; q < N; ++q) mx = fmaxf(mx, __shfl_sync(0xffffffffu, c, row + q));
  c = expf(c - mx);
  double sum = 0.0;
#pragma unroll
  for (int q = 0; q < N; ++q) sum += __shfl_sync(0xffffffffu, c, row + q);
  c = static_cast<float>(c * (1.0 / sum)) + eps;
  c *= fast_reciprocal(line_sum<N>(c, col, N) + eps);
  for (int it = 1; it < iters; ++it) {
    c *= fast_reciprocal(line_sum<N>(c, row, 1) + eps);
    c *= fast_reciprocal(line_sum<N>(c, col, N) + eps);
  }
  return c;
}

}  // namespace frank::cuda
