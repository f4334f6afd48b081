#include "frank/engine/v41_session.h"

namespace frank::engine {

V41Session::V41Session(const model::V41Config& c, const model::EngramLayout& engram)
    : windows(c.num_layers, std::vector<float>(int64_t{c.sliding_window} * c.head_dim)), sources(c.num_layers) {
  for (int l : c.kv_source_layers) sources[l].emplace();
  if (!c.engram.layer_ids.empty()) this->engram = engram_fresh_history(engram);
}

}  // namespace frank::engine
