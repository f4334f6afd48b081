#include "frank/cpu/quantized_linear.h"

#include <fmt/format.h>

#include "frank/core/error.h"
#include "frank/cpu/quant/exl3_gemv.h"
#include "frank/cpu/quant/quant_formats.h"

namespace frank::cpu {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double fp8_row_dot(const QuantizedMatrix& w, int64_t r, const float* x) {
  const int64_t B = w.block, scale_cols = ceil_div(w.cols, B);
  const uint8_t* values = w.values.data() + r * w.cols;
  const uint8_t* scales = w.scales.data() + (r / B) * scale_cols;
  double sum = 0;
  for (int64_t j = 0; j < w.cols; ++j)
    sum += static_cast<double>(e4m3_value(values[j])) * ue8m0_value(scales[j / B]) * x[j];
  return sum;
}

double fp4_row_dot(const QuantizedMatrix& w, int64_t r, const float* x) {
  const uint8_t* packed = w.values.data() + r * (w.cols / 2);
  const uint8_t* scales = w.scales.data() + r * (w.cols / 32);
  double sum = 0;
  for (int64_t j = 0; j < w.cols; ++j) {
    const uint8_t nibble = j % 2 == 0 ? packed[j / 2] & 0x0F : packed[j / 2] >> 4;  // low nibble first
    sum += static_cast<double>(e2m1_value(nibble)) * ue8m0_value(scales[j / 32]) * x[j];
  }
  return sum;
}

}  // namespace

void check_quantized_matrix(const QuantizedMatrix& w) {
  if (w.format == QuantizedMatrix::Format::Exl3) {
    exl3_view(w);  // checks the trellis, the sign vectors and their sizes
    return;
  }
  size_t values = 0, scales = 0;
  if (w.format == QuantizedMatrix::Format::Fp8Block) {
    const Fp8BlockMatrix view{w.values.data(), w.scales.data(), w.rows, w.cols, w.block};
    validate(view);
    values = static_cast<size_t>(w.rows * w.cols);
    scales = static_cast<size_t>(view.scale_rows() * view.scale_cols());
  } else {
    const Fp4Matrix view{w.values.data(), w.scales.data(), w.rows, w.cols};
    validate(view);
    values = static_cast<size_t>(w.rows * w.cols / 2);
    scales = static_cast<size_t>(w.rows * view.scale_cols());
  }
  if (w.values.size() != values || w.scales.size() != scales)
    throw Error(fmt::format("quantized matrix [{}, {}]: {} value bytes and {} scales, expected {} and {}", w.rows,
                            w.cols, w.values.size(), w.scales.size(), values, scales));
}

std::vector<float> dequantize(const QuantizedMatrix& w) {
  check_quantized_matrix(w);
  std::vector<float> out(static_cast<size_t>(w.rows * w.cols));
  if (w.format == QuantizedMatrix::Format::Exl3)
    dequantize(exl3_view(w), out.data());
  else if (w.format == QuantizedMatrix::Format::Fp8Block)
    dequantize(Fp8BlockMatrix{w.values.data(), w.scales.data(), w.rows, w.cols, w.block}, out.data());
  else
    dequantize(Fp4Matrix{w.values.data(), w.scales.data(), w.rows, w.cols}, out.data());
  return out;
}

void quantized_linear_rows(const float* x, int64_t n, const QuantizedMatrix& w, int64_t row_begin, int64_t row_end,
                           float* y) {
  if (w.format == QuantizedMatrix::Format::Exl3) {
    linear_rows(active_cpu_kernels(), x, n, exl3_view(w), y, row_begin, row_end);
    return;
  }
  const int64_t out = row_end - row_begin;
  const bool fp8 = w.format == QuantizedMatrix::Format::Fp8Block;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = row_begin; r < row_end; ++r) {
      const float* xt = x + t * w.cols;
      y[t * out + (r - row_begin)] = static_cast<float>(fp8 ? fp8_row_dot(w, r, xt) : fp4_row_dot(w, r, xt));
    }
}

}  // namespace frank::cpu
