#pragma once
// The bytes a quantized Linear weight takes as stored, for memory plans and read-rate reports. An
// EXL3 matrix counts by its shape and bits, so a shape-only one (a synthetic model's, whose trellis
// a GPU makes in device memory) counts as it will be once made.
#include <cstddef>
#include <cstdint>

#include "frank/core/linear_weight.h"

namespace frank {

// An EXL3 matrix [rows, cols] at `bits` a weight: the trellis of the matrix zero-padded to
// multiples of 128 both ways (I16 [pc/16, pr/16, 16 * bits]), and the fp16 suh [pc] and svh [pr]
// (shared docs/exl3-format.md §1.1).
constexpr int64_t exl3_bytes(int64_t rows, int64_t cols, int bits) {
  const int64_t pr = (rows + 127) / 128 * 128, pc = (cols + 127) / 128 * 128;
  return pr * pc * bits / 8 + 2 * (pr + pc);
}

// What `q` takes packed (FP8 / FP4 as shipped, EXL3 as trellis and sign vectors): its bytes(),
// except that an EXL3 matrix counts by exl3_bytes (the same for a loaded one; also right for a
// shape-only one).
inline size_t packed_bytes(const QuantizedMatrix& q) {
  return q.format == QuantizedMatrix::Format::Exl3 ? static_cast<size_t>(exl3_bytes(q.rows, q.cols, q.bits))
                                                   : q.bytes();
}

}  // namespace frank
