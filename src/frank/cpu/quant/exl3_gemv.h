#pragma once
// y = W · x on EXL3 weights (exl3_matrix.h) for a few tokens at a time (decode: 1-8), decoding
// the trellis tile by tile where it is used: no dequantised copy of W.
//
// Numerics, in fp32 throughout (ExLlamaV3's kernels round x ∘ suh, the Hadamard outputs and y to
// fp16; frank does not): u = H(suh ∘ x) (one rounding per product, then the butterflies of
// hadamard.h); z = Q^T u with every Q value decoded exactly (fp16) and summed in the fixed order
// of exl3_kernels.h; y = svh ∘ H(z). Every kernel level (scalar, AVX2, AVX-512) gives the same
// result bit for bit, whatever the thread split, since each output block is computed alone.
#include <cstdint>

#include "frank/cpu/quant/exl3_matrix.h"
#include "frank/cpu/quant/quant_gemv.h"

namespace frank::cpu {

// y[t, r - row_begin] = (W x_t)_r for rows r in [row_begin, row_end), t < n; x is [n, cols], y is
// [n, row_end - row_begin]. Computes the 128-output blocks the range touches (the output Hadamard
// mixes a whole block). Throws frank::Error for an invalid matrix, range or unsupported level.
void linear_rows(CpuKernels level, const float* x, std::int64_t n, const Exl3Matrix& w, float* y,
                 std::int64_t row_begin, std::int64_t row_end);
// All rows, at active_cpu_kernels().
void linear(const float* x, std::int64_t n, const Exl3Matrix& w, float* y);

// W [rows, cols] in fp32 (for backends without EXL3 kernels and for tests; the kernels never build
// W): Q decoded exactly, both Hadamards and the sign/scale vectors applied in fp32.
void dequantize(const Exl3Matrix& w, float* out);

}  // namespace frank::cpu
