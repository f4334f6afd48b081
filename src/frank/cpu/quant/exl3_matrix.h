#pragma once
// An EXL3 (ExLlamaV3) Linear weight as a non-owning view, in the engine's orientation: y = W x
// with W [rows = out, cols = in]. On disk it is stored transposed, (in, out):
//   W^T = diag(suh) · H · Q · H · diag(svh)        (docs/exl3-format.md §2, shared docs)
// Q [cols, rows] the decoded trellis (exl3_trellis.h), H block-diagonal 128-point Hadamards
// (hadamard.h) over the inputs on the left and the outputs on the right, suh / svh fp16 sign and
// scale vectors. So y = svh ∘ H( Q^T · H(suh ∘ x) ): the forward pass never builds W.
// ExLlamaV3 zero-pads both dimensions to multiples of 128; the trellis, suh and svh have the padded
// sizes, the model's Linear the real ones (x is read as zero past `cols`, outputs past `rows` are
// dropped). Every DeepSeek-V4/V4.1 shape is already a multiple of 128.
#include <cstdint>

#include "frank/cpu/quant/exl3_trellis.h"

namespace frank::cpu {

struct Exl3Matrix {
  Exl3Trellis trellis;                  // [padded_cols/16, padded_rows/16, 16 * bits]
  const std::uint16_t* suh = nullptr;   // fp16 [padded_cols]
  const std::uint16_t* svh = nullptr;   // fp16 [padded_rows]
  std::int64_t rows = 0, cols = 0;      // the Linear's out and in features

  std::int64_t padded_rows() const { return trellis.out_features(); }
  std::int64_t padded_cols() const { return trellis.in_features(); }
};

// The size ExLlamaV3 pads a dimension to: the next multiple of 128.
std::int64_t exl3_padded(std::int64_t features);

// Throws frank::Error naming what is wrong: an invalid trellis (exl3_trellis.h), padded dimensions
// that are not rows and cols rounded up to multiples of 128 (the Hadamard blocks), or null sign
// vectors.
void validate(const Exl3Matrix& w);

// The view of a QuantizedMatrix of format Exl3 (checked with validate()).
Exl3Matrix exl3_view(const QuantizedMatrix& w);

}  // namespace frank::cpu
