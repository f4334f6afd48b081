#pragma once
// y = W · x computed directly on DeepSeek-V4's FP8-block and FP4 weights, for a few tokens at a
// time (decode: 1-8), with no dequantised copy of W.
//
// Numerics (every kernel level): each weight is decoded and scaled exactly to the fp32 value
// dequantize() gives (the FP8 SIMD kernels to that value times 2^-8, undone exactly on the sum),
// and each output is an fp32 sum of the cols products W_ij * x_j in some order (FMA or not). So
// |y_i - exact_i| <= gamma(cols) * sum_j |W_ij x_j|, gamma(k) = k u / (1 - k u), u = 2^-24
// (Higham, Accuracy and Stability, eq. 3.5), plus an underflow term when products fall below
// fp32's normal range (at most cols * 2^-141 with the 2^-8 factor). The scale is read once per
// block and multiplied into the decoded weights (exact: a power of two), not into partial sums.
// A NaN weight byte or a NaN scale makes the outputs it touches NaN.
#include <cstdint>
#include <string_view>

#include "frank/cpu/quant/quant_formats.h"

namespace frank::cpu {

enum class CpuKernels { Scalar, Avx2, Avx512 };

std::string_view name(CpuKernels level);
// Whether this CPU (and OS) can run the level: AVX2 needs avx2+fma+f16c, AVX-512 needs
// avx512f+avx512bw+avx512vl.
bool cpu_supports(CpuKernels level);
// The level linear() uses, chosen once: FRANK_CPU_KERNELS=scalar|avx2|avx512 if set (frank::Error
// if unknown or unsupported here), else the best supported.
CpuKernels active_cpu_kernels();

// y[t, :] = W · x[t, :] for t < n; x is [n, cols], y is [n, rows]. Any n; 1-8 is the target.
void linear(const float* x, int64_t n, const Fp8BlockMatrix& w, float* y);
void linear(const float* x, int64_t n, const Fp4Matrix& w, float* y);

// The same for rows [row_begin, row_end) only (y keeps its [n, rows] layout), at a given level
// (frank::Error if unsupported): the unit a thread pool splits, and how tests reach every level.
void linear_rows(CpuKernels level, const float* x, int64_t n, const Fp8BlockMatrix& w, float* y,
                 int64_t row_begin, int64_t row_end);
void linear_rows(CpuKernels level, const float* x, int64_t n, const Fp4Matrix& w, float* y,
                 int64_t row_begin, int64_t row_end);

}  // namespace frank::cpu
