#include "frank/engine/v41_session.h"

namespace frank::engine {

bool V41SourceState::add_to_group(const float* kv, const float* gate, int64_t width, int64_t position, int ratio) {
  if (pending == 0) pending_position = position;
  pending_kv.insert(pending_kv.end(), kv, kv + width);
  pending_gate.insert(pending_gate.end(), gate, gate + width);
  return ++pending == ratio;
}

void V41SourceState::close_group() {
  pending = 0;
  pending_kv.clear();
  pending_gate.clear();
}

V41Session::V41Session(const model::V41Config& c, const model::EngramLayout& engram)
    : windows(c.num_layers, std::vector<float>(int64_t{c.sliding_window} * c.head_dim)), sources(c.num_layers) {
  for (int l : c.kv_source_layers) sources[l].emplace();
  if (!c.engram.layer_ids.empty()) this->engram = engram_fresh_history(engram);
}

}  // namespace frank::engine
