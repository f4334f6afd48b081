// Portable kernels: decode each weight by table, scale it (a power of two: exact), and accumulate
// in fp32, one accumulator per token, columns in order.
#include "frank/cpu/quant/quant_kernels.h"

namespace frank::cpu::detail {

void fp8_rows_scalar(const float* x, int n, const Fp8BlockMatrix& w, float* y, int64_t row_begin,
                     int64_t row_end) {
  const float* e4m3 = e4m3_table();
  const float* ue8m0 = ue8m0_table();
  for (int64_t i = row_begin; i < row_end; ++i) {
    const uint8_t* row = w.weight + i * w.cols;
    const uint8_t* row_scales = w.scales + (i / w.block) * w.scale_cols();
    float acc[kMaxKernelTokens] = {};
    for (int64_t j = 0; j < w.cols; ++j) {
      const float weight = e4m3[row[j]] * ue8m0[row_scales[j / w.block]];
      for (int t = 0; t < n; ++t) acc[t] += weight * x[t * w.cols + j];
    }
    for (int t = 0; t < n; ++t) y[t * w.rows + i] = acc[t];
  }
}

void fp4_rows_scalar(const float* x, int n, const Fp4Matrix& w, float* y, int64_t row_begin,
                     int64_t row_end) {
  const float* e2m1 = e2m1_table();
  const float* ue8m0 = ue8m0_table();
  for (int64_t i = row_begin; i < row_end; ++i) {
    const uint8_t* row = w.packed + i * (w.cols / 2);
    const uint8_t* row_scales = w.scales + i * w.scale_cols();
    float acc[kMaxKernelTokens] = {};
    for (int64_t j = 0; j < w.cols; j += 2) {
      const float scale = ue8m0[row_scales[j / Fp4Matrix::kGroup]];
      const float even = e2m1[row[j / 2] & 0xF] * scale, odd = e2m1[row[j / 2] >> 4] * scale;
      for (int t = 0; t < n; ++t) acc[t] += even * x[t * w.cols + j] + odd * x[t * w.cols + j + 1];
    }
    for (int t = 0; t < n; ++t) y[t * w.rows + i] = acc[t];
  }
}

}  // namespace frank::cpu::detail
