#pragma once
// Session: all per-request state of the forward pass, explicit so it can be inspected, copied
// (checkpoints) and rolled back later. A session consumes tokens strictly in order.
#include <cstdint>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/compressor.h"
#include "frank/model/config.h"

namespace frank::engine {

// The compressors' raw per-token projections of the last forward call (they are computed anyway
// and moved here): what Model::rewind replays to take the compressors back to any token of that
// call without recomputing the model. Also the experts the call routed to.
struct CallRecord {
  Tensor compressor_kv, compressor_gate;  // [tokens, projection width]; empty without a compressor
  Tensor indexer_kv, indexer_gate;        // CSA layers
  std::vector<int32_t> experts;           // [tokens, experts_per_token]: the routed experts (traces, stats)
};

struct LayerState {
  // Ring of the last `sliding_window` K=V rows (post-norm, post-RoPE): token t sits in row t % window.
  std::vector<float> window;
  CompressorState compressor;  // CSA and HCA layers
  CompressorState indexer;     // CSA layers: the indexer's own compressor (its entries are the index keys)
  CallRecord last_call;
};

struct Session {
  Session() = default;
  explicit Session(const model::ModelConfig& c);

  int64_t position = 0;  // tokens consumed so far = position of the next token
  std::vector<LayerState> layers;
};

}  // namespace frank::engine
