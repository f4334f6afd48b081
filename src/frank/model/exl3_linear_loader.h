#pragma once
// Reads one EXL3 (ExLlamaV3) Linear from a checkpoint into a LinearWeight (QuantizedMatrix of
// format Exl3), checking every tensor (docs/exl3-format.md §1.1, shared docs):
//   <stem>.trellis   I16 [in/16, out/16, 16K], in and out rounded up to multiples of 128; K = 1..8
//   <stem>.suh       F16 [in, padded]      <stem>.svh   F16 [out, padded]
//   <stem>.mcg / <stem>.mul1   the codebook marker (presence only; neither means 3INST)
// Rejected with the tensor's name and the reason: other dtypes or shapes, both markers, a
// half-integer bitrate, a trellis that is not the model's [out, in] transposed and padded, a bias
// or the legacy packed-sign .su / .sv, and disagreement with what the pack declares (exl3_pack.h).
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frank/core/linear_weight.h"
#include "frank/model/checkpoint.h"
#include "frank/model/exl3_pack.h"

namespace frank::model {

// "<stem>.trellis" for the Linear whose weight would be `weight_name` ("<stem>.weight"), if the
// checkpoint has it.
std::optional<std::string> exl3_trellis_name(const Checkpoint& checkpoint, const std::string& weight_name);

// `shape` is the Linear's [out, in]; the names read are added to `used`.
void load_exl3_linear(const Checkpoint& checkpoint, const std::string& weight_name, const std::vector<int64_t>& shape,
                      const Exl3Pack& pack, LinearWeight& dst, std::set<std::string>& used);

}  // namespace frank::model
