#pragma once
// V41Session: all per-request state of the DeepSeek-V4.1 forward pass (dsv41-model.md §2, §5;
// reference notes §2.11-12), explicit so a session can be fed in any chunking: every layer's
// window ring, each KV source's open ratio-2 group, compressed entries and indexer keys, and the
// Engram hash's look-back. Layers that reuse a source's entries or selection store nothing.
#include <cstdint>
#include <optional>
#include <vector>

#include "frank/engine/engram.h"
#include "frank/model/config_v41.h"
#include "frank/model/engram_layout.h"

namespace frank::engine {

// The raw projections (kv, gate: [tokens, head_dim] each, row-major) a gated (ratio-2) KV source
// took in during the last forward call, one row per token from position `start`: v41_rewind rebuilds
// the open group of any prefix of that call from them. A record of the call, not of the sequence (a
// session fed the same tokens in other calls holds another one); none is kept for a call longer
// than the window, which cannot be rewound.
struct V41CallRecord {
  std::vector<float> kv, gate;
  int64_t start = 0, tokens = 0;
};

// What a KV source (a layer that owns a compressor) carries between calls.
struct V41SourceState {
  // Ratio 2: the raw fp32 projections (kv, gate) of the open group's tokens and the group's first
  // position; they pool into an entry once the group has `ratio` tokens.
  std::vector<float> pending_kv, pending_gate;
  int pending = 0;
  int64_t pending_position = 0;
  // One row per closed group, in order: the entry every layer of the group attends (post-RoPE,
  // FP4-rounded, head_dim) and its indexer key (post-RoPE, FP4-rounded, index_head_dim).
  std::vector<float> entries, index_keys;
  int64_t n_entries = 0;
  V41CallRecord last_call;  // ratio 2 only

  // Takes the raw rows (`width` values each) of the token at `position` into the open group; true
  // when the group then holds `ratio` rows, for the caller to pool and empty it (close_group).
  bool add_to_group(const float* kv, const float* gate, int64_t width, int64_t position, int ratio);
  void close_group();
};

struct V41Session {
  V41Session() = default;
  V41Session(const model::V41Config& c, const model::EngramLayout& engram);

  int64_t position = 0;  // tokens consumed so far = position of the next token
  // Per layer: ring of the last sliding_window K=V rows (post-RoPE, FP8-rounded), row t % window.
  std::vector<std::vector<float>> windows;
  std::vector<std::optional<V41SourceState>> sources;  // per layer; set for KV sources
  EngramHistory engram;                                // empty without Engram layers
};

}  // namespace frank::engine
