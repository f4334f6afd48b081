#pragma once
// The reference product with a quantized Linear weight: every value decoded exactly where it is
// used (e4m3 / e2m1 times its power-of-two scale: no rounding) and accumulated in double, as the
// fp32 reference does for dense weights; EXL3 weights go through cpu/quant/exl3_gemv.h (fp32, the
// same result at every kernel level). Nothing is dequantised ahead of time.
#include <cstdint>
#include <vector>

#include "frank/core/linear_weight.h"

namespace frank::cpu {

// y[t, r - row_begin] = sum_j W[r][j] x[t][j] for rows r in [row_begin, row_end), t < n.
void quantized_linear_rows(const float* x, int64_t n, const QuantizedMatrix& w, int64_t row_begin, int64_t row_end,
                           float* y);

// W as fp32 [rows * cols], decoded exactly (e4m3 / e2m1 times a power of two needs at most 4
// significant bits, so it is also exact in bf16; EXL3's Hadamard sandwich is computed in fp32). For a backend that has no kernels for the
// quantized formats yet; the CPU reference itself never materialises W.
std::vector<float> dequantize(const QuantizedMatrix& w);

// Throws frank::Error when the byte counts do not match the shape and format (a loader's check).
void check_quantized_matrix(const QuantizedMatrix& w);

}  // namespace frank::cpu
