#pragma once
// engine::sinkhorn on one N x N matrix held whole in a thread's registers (N a template argument,
// so every index is a constant). One warp of hc_pre's finishing block runs it for one token, every
// lane the same work: the 2 * iters - 1 normalisations are a chain of dependent steps, and keeping
// the matrix in registers makes each step a few adds and multiplies with no shuffle latency.
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

}  // namespace frank::cuda
