#pragma once
// Per-ISA kernels behind quant_gemv.h (internal). Each computes rows [row_begin, row_end) of
// y = W · x for n <= kMaxKernelTokens tokens on a validated matrix; quant_gemv.cpp splits larger n.
// The AVX2 / AVX-512 ones live in their own .cpp with per-function target attributes, so they are
// only ever called after cpu_supports() said yes.
#include <cstdint>

#include "frank/cpu/quant/quant_formats.h"

namespace frank::cpu::detail {

inline constexpr int kMaxKernelTokens = 8;

#define FRANK_QUANT_KERNELS(isa)                                                                    \
  void fp8_rows_##isa(const float* x, int n, const Fp8BlockMatrix& w, float* y, int64_t row_begin, \
                      int64_t row_end);                                                             \
  void fp4_rows_##isa(const float* x, int n, const Fp4Matrix& w, float* y, int64_t row_begin,      \
                      int64_t row_end);
FRANK_QUANT_KERNELS(scalar)
FRANK_QUANT_KERNELS(avx2)
FRANK_QUANT_KERNELS(avx512)
#undef FRANK_QUANT_KERNELS

// FP4 kernels multiply `lanes` decoded even-indexed weights, then `lanes` odd-indexed ones, by x;
// this copies x [n, cols] into that order: per 2*lanes columns, the even ones then the odd ones.
inline void deinterleave_pairs(const float* x, int n, int64_t cols, int lanes, float* out) {
  for (int64_t base = 0; base < n * cols; base += 2 * lanes)
    for (int k = 0; k < lanes; ++k) {
      out[base + k] = x[base + 2 * k];
      out[base + lanes + k] = x[base + 2 * k + 1];
    }
}

}  // namespace frank::cpu::detail
