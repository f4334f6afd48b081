#pragma once
// engine::sinkhorn on one N x N matrix held whole in a thread's registers (N a template argument,
// so every index is a constant). One warp of hc_pre's finishing block runs it for one token, every
// lane the same work: the 2 * iters - 1 normalisations are a chain of dependent steps, and keeping
// the matrix in registers makes each step a few adds and multiplies with no shuffle latency.
#include <cmath>

namespace frank::cuda {

// Divides line i (a row when Rows, else a column) of c by its sum + eps. All N sums are taken
// first, in the reference's order; then one precise reciprocal per line and a product per element
// (the reference divides each element: c * (1 / s) is within an ulp of c / s, and Sinkhorn's
// normalisations do not amplify such differences).
template <int N, bool Rows>
__device__ __forceinline__ void normalise(float (&c)[N * N], float eps) {
  float inv[N];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) s += Rows ? c[i * N + k] : c[k * N + i];
    inv[i] = 1.0f / (s + eps);
  }
#pragma unroll
  for (int j = 0; j < N; ++j)
#pragma unroll
    for (int k = 0; k < N; ++k) c[j * N + k] *= Rows ? inv[j] : inv[k];
}

// Row softmax (cpu::softmax: exp(x - max), a double sum, a double division) plus eps, a column
// normalisation, then (iters - 1) x (rows, columns), eps in every denominator.
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
#pragma unroll
    for (int k = 0; k < N; ++k) c[j * N + k] = static_cast<float>(c[j * N + k] / sum) + eps;
  }
  normalise<N, false>(c, eps);
  for (int it = 1; it < iters; ++it) {
    normalise<N, true>(c, eps);
    normalise<N, false>(c, eps);
  }
}

}  // namespace frank::cuda
