#pragma once
// One DeepSeek-V4 decoder layer over a chunk of tokens, shared by the main model and the MTP
// block: an mHC site around attention, then one around the MoE (dsv4-model.md §3-6).
#include <cstdint>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/attention.h"
#include "frank/engine/session.h"
#include "frank/model/weights.h"

namespace frank::engine {

// streams: [n, hc_mult * hidden] for the tokens at positions start..start+n-1, updated in place.
void decoder_layer(const model::ModelConfig& c, const model::LayerWeights& weights, const Attention& attention,
                   bool hash_routed, Tensor& streams, int64_t start, LayerState& state,
                   const std::vector<int32_t>& tokens);

}  // namespace frank::engine
