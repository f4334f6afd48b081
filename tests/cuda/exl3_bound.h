#pragma once
// A bound on how far the GPU's EXL3 GEMV (frank/cuda/exl3_gemv.h, exl3_moe.cuh) may be from the
// CPU's (cpu::linear_rows) for each output, derived from the data (test_cuda_exl3.cpp and the MoE
// checks of ops_check_exl3_moe.cpp).
//
// Same input: both compute u = H(suh ∘ x) with the same fp32 operations (the same bits) and y_r =
// svh_r fl(H z)_r with the same operations, but z_c = sum_i q_ic u_i over the k = padded_cols
// inputs in different orders (the CPU tile by tile with separate products, the GPU split over
// lanes and slices with fma). In either, each product passes through at most k roundings of
// relative size <= eps = 2^-24 (CPU: its product, <= 15 tile adds, k/16 accumulator adds; GPU: its
// fma, <= k/4 later fma in its lane, 2 lane adds, <= k/128 slice adds), so |fl(z_c) - z_c| <= γ_k
// S_c with S_c = sum_i |q_ic u_i| and γ_m = m eps / (1 - m eps) (Higham, Accuracy and Stability of
// Numerical Algorithms, §3.1, §4.2), and |fl(z_c)| <= (1 + γ_k) S_c. (H z)_r = sum_c ±s z_c over
// the 128 columns of r's block, s = 0.088388347648 (the scale both use); each term gets 7 butterfly
// roundings, the scale's and svh's: 9 more. So each side is within |svh_r| s sum_c (γ_k + γ_9 + γ_k
// γ_9) S_c <= |svh_r| s γ_{k+9} sum_c S_c of the exact value, and the two sides within twice that.
// (The sums are over q u, not w x: the GEMV sums in the Hadamard-rotated basis.)
//
// Inputs that differ (the GPU's x within dx_j of the CPU's, elementwise): then also
//   - the exact map's difference, |W (x_gpu - x_cpu)|_r <= sum_j |W_rj| dx_j, with |W_rj| <=
//     |fl(W_rj)| + γ_32 M_rj (fl(W) = cpu::dequantize's fp32 W, at most 32 roundings of each term
//     of W_rj = svh_r s^2 sum ±q suh_j, M_rj = |svh_r| |suh_j| s^2 sum |q| over the 128 x 128 block
//     of (j, r));
//   - u is no longer the same bits: each side's u_i is within γ_9 s sum_j |suh_j| X_j of its exact
//     value (a product, 7 butterflies, the scale; sum over i's block, X = |x_cpu| + dx bounds both
//     inputs), which Q and the output transform carry as |svh_r| s sum_c sum_i |q_ic| of it, on
//     each side;
//   - the rounding terms above take U_i = |u_cpu_i| + s sum_j |suh_j| dx_j + 2 γ_9 s sum_j |suh_j|
//     X_j (a bound on both sides' |u_i|) in place of |u_i|.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "frank/core/dtype.h"
#include "frank/cpu/quant/exl3_gemv.h"
#include "frank/cpu/quant/hadamard.h"

namespace frank_test {

inline double exl3_gamma(double m) {
  const double eps = std::ldexp(1.0, -24);
  return m * eps / (1 - m * eps);
}

// bound[t * rows + r] for t < n, r < m.rows: |y_gpu - y_cpu| of y = W x_t, x [n, cols] the CPU's
// input; dx [n, cols] bounds |x_gpu - x_cpu| elementwise, or is null (the same input).
inline std::vector<double> exl3_gemv_bound(const frank::cpu::Exl3Matrix& m, const float* x, const double* dx, int n) {
  const int64_t rows = m.padded_rows(), cols = m.padded_cols();
  const std::vector<uint16_t> q = frank::cpu::decode(m.trellis);  // [cols, rows]
  std::vector<float> abs_q(q.size());
  for (size_t i = 0; i < q.size(); ++i) abs_q[i] = std::abs(frank::f16_to_f32(q[i]));
  const double gamma = exl3_gamma(static_cast<double>(cols + 9)), gamma9 = exl3_gamma(9), s = 0.088388347648;
  const auto suh = [&](int64_t j) { return std::abs(static_cast<double>(frank::f16_to_f32(m.suh[j]))); };
  const auto svh = [&](int64_t r) { return std::abs(static_cast<double>(frank::f16_to_f32(m.svh[r]))); };
  std::vector<float> w, block_q;  // fl(W) [rows, cols] and sum |q| per 128 x 128 block, when inputs differ
  if (dx) {
    w.resize(static_cast<size_t>(m.rows * m.cols));
    frank::cpu::dequantize(m, w.data());
    block_q.assign(static_cast<size_t>(cols / 128 * (rows / 128)), 0.0f);
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t c = 0; c < rows; ++c) block_q[i / 128 * (rows / 128) + c / 128] += abs_q[i * rows + c];
  }
  std::vector<double> bound(static_cast<size_t>(n * m.rows));
  std::vector<float> u(static_cast<size_t>(cols));
  std::vector<double> big_u(static_cast<size_t>(cols)), u_error(static_cast<size_t>(cols));
  std::vector<double> magnitude(static_cast<size_t>(rows)), carried(static_cast<size_t>(rows));
  for (int t = 0; t < n; ++t) {
    const float* xt = x + t * m.cols;
    const double* dxt = dx ? dx + t * m.cols : nullptr;
    std::fill(u.begin(), u.end(), 0.0f);
    for (int64_t i = 0; i < m.cols; ++i) u[i] = xt[i] * frank::f16_to_f32(m.suh[i]);  // cpu::linear_rows
    frank::cpu::hadamard128_blocks(u.data(), cols);
    for (int64_t i = 0; i < cols; ++i) big_u[i] = std::abs(static_cast<double>(u[i])), u_error[i] = 0;
    if (dxt)
      for (int64_t b = 0; b < cols; b += 128) {
        double moved = 0, size = 0;  // s sum |suh| dx, s sum |suh| X over the block
        for (int64_t j = b; j < std::min(b + 128, m.cols); ++j)
          moved += s * suh(j) * dxt[j], size += s * suh(j) * (std::abs(xt[j]) + dxt[j]);
        for (int64_t i = b; i < b + 128; ++i) big_u[i] += moved + 2 * gamma9 * size, u_error[i] = gamma9 * size;
      }
    std::fill(magnitude.begin(), magnitude.end(), 0.0);  // S_c
    std::fill(carried.begin(), carried.end(), 0.0);      // sum_i |q_ic| u_error_i
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t c = 0; c < rows; ++c) {
        magnitude[c] += abs_q[i * rows + c] * big_u[i];
        carried[c] += abs_q[i * rows + c] * u_error[i];
      }
    for (int64_t block = 0; block < rows / 128; ++block) {
      double block_sum = 0, block_carried = 0;
      for (int64_t c = 128 * block; c < 128 * (block + 1); ++c) block_sum += magnitude[c], block_carried += carried[c];
      for (int64_t r = 128 * block; r < std::min(m.rows, 128 * (block + 1)); ++r) {
        double b = 2 * gamma * svh(r) * s * block_sum + 2 * svh(r) * s * block_carried;
        if (dxt)
          for (int64_t j = 0; j < m.cols; ++j) {
            const double most = svh(r) * suh(j) * s * s * block_q[j / 128 * (rows / 128) + block];
            b += (std::abs(static_cast<double>(w[r * m.cols + j])) + exl3_gamma(32) * most) * dxt[j];
          }
        bound[t * m.rows + r] = b;
      }
    }
  }
  return bound;
}

}  // namespace frank_test
