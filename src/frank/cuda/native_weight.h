#pragma once
// An FP8 / FP4 Linear weight in the GPU's layout (weight_format.h): the checkpoint's value bytes,
// zero bytes to a multiple of 16, its scale bytes — nothing decoded, nothing reordered. Plain C++
// (DeviceWeights builds these before the upload; the CPU tests check the layout).
#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "frank/core/error.h"
#include "frank/core/linear_weight.h"
#include "frank/cuda/weight_format.h"

namespace frank::cuda {

// The GPU type of a quantised matrix: FP8 with its block side (128 or 32), or FP4. EXL3 has no GPU
// Linear of this kind: frank::Error.
inline WeightType native_type(const QuantizedMatrix& w) {
  if (w.format == QuantizedMatrix::Format::Fp4) return WeightType::Fp4;
  if (w.format == QuantizedMatrix::Format::Fp8Block && w.block == 128) return WeightType::Fp8Block128;
  if (w.format == QuantizedMatrix::Format::Fp8Block && w.block == 32) return WeightType::Fp8Block32;
  throw Error(fmt::format("a [{}, {}] quantized weight has no native CUDA type (FP8 blocks of 128 or 32, FP4)",
                          w.rows, w.cols));
}

// The buffer of weight_bytes(native_type(w), rows, cols) bytes. w must be consistent
// (cpu::check_quantized_matrix): frank::Error when its byte counts are not the layout's.
inline std::vector<uint8_t> native_bytes(const QuantizedMatrix& w) {
  const WeightType t = native_type(w);
  if (static_cast<int64_t>(w.values.size()) != weight_value_bytes(t, w.rows, w.cols) ||
      static_cast<int64_t>(w.scales.size()) != weight_scale_bytes(t, w.rows, w.cols))
    throw Error(fmt::format("quantized weight [{}, {}]: {} value bytes and {} scales do not fit its format", w.rows,
                            w.cols, w.values.size(), w.scales.size()));
  std::vector<uint8_t> out(static_cast<size_t>(weight_bytes(t, w.rows, w.cols)), 0);
  std::copy(w.values.begin(), w.values.end(), out.begin());
  std::copy(w.scales.begin(), w.scales.end(), out.begin() + weight_scale_offset(t, w.rows, w.cols));
  return out;
}

}  // namespace frank::cuda
