#pragma once
// The weight of a Linear layer ([out, in], y = W x): fp32, or kept as the checkpoint ships it —
// DeepSeek's FP8 (e4m3 values with one ue8m0 power-of-two scale per square block), FP4 (e2m1
// values two per byte, low nibble first, one ue8m0 scale per 32 values of a row), or ExLlamaV3's
// EXL3 (trellis-coded 16x16 tiles between two Hadamard transforms, cpu/quant/exl3_matrix.h).
// Quantized weights are computed on directly; the model is never held as a dequantised copy.
#include <cstdint>
#include <optional>
#include <vector>

#include "frank/core/tensor.h"

namespace frank {

// Which EXL3 codebook turns a trellis state into a weight (cpu/quant/exl3_codebook.h). A tensor
// says it with a marker tensor next to its trellis: `.mcg`, `.mul1`, or neither for 3INST.
enum class Exl3Codebook { ThreeInst, Mcg, Mul1 };

struct QuantizedMatrix {
  enum class Format { Fp8Block, Fp4, Exl3 };
  Format format = Format::Fp8Block;
  int64_t rows = 0, cols = 0;
  int block = 0;                // Fp8Block: the square block's side (128, or 32 in DeepSeek-V4.1)
  std::vector<uint8_t> values;  // Fp8Block: [rows, cols]; Fp4: [rows, cols / 2]
  std::vector<uint8_t> scales;  // Fp8Block: [ceil(rows/block), ceil(cols/block)]; Fp4: [rows, cols / 32]
  // Exl3 only (values and scales stay empty): the trellis as stored, in (in, out) orientation,
  // I16 [cols/16, rows/16, 16 * bits]; the fp16 sign/scale vectors suh [cols] and svh [rows].
  int bits = 0;
  Exl3Codebook codebook = Exl3Codebook::ThreeInst;
  std::vector<uint16_t> trellis, suh, svh;
  size_t bytes() const {
    return values.size() + scales.size() + 2 * (trellis.size() + suh.size() + svh.size());
  }
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
