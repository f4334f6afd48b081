#pragma once
// The weight of a Linear layer ([out, in], y = W x): fp32, or kept as the checkpoint ships it —
// DeepSeek's FP8 (e4m3 values with one ue8m0 power-of-two scale per square block) or FP4 (e2m1
// values two per byte, low nibble first, one ue8m0 scale per 32 values of a row). Quantized
// weights are computed on directly; the model is never held as a dequantised copy.
#include <cstdint>
#include <optional>
#include <vector>

#include "frank/core/tensor.h"

namespace frank {

struct QuantizedMatrix {
  enum class Format { Fp8Block, Fp4 };
  Format format = Format::Fp8Block;
  int64_t rows = 0, cols = 0;
  int block = 0;                // Fp8Block: the square block's side (128, or 32 in DeepSeek-V4.1)
  std::vector<uint8_t> values;  // Fp8Block: [rows, cols]; Fp4: [rows, cols / 2]
  std::vector<uint8_t> scales;  // Fp8Block: [ceil(rows/block), ceil(cols/block)]; Fp4: [rows, cols / 32]
  size_t bytes() const { return values.size() + scales.size(); }
};

struct LinearWeight {
  Tensor dense;  // fp32 [out, in]; empty when the weight is quantized
  std::optional<QuantizedMatrix> quantized;

  LinearWeight() = default;
  LinearWeight(Tensor t) : dense(std::move(t)) {}  // NOLINT: fp32 weights are the common case
  int64_t rows() const { return quantized ? quantized->rows : dense.rows(); }
  int64_t cols() const { return quantized ? quantized->cols : dense.cols(); }
};

}  // namespace frank
