#pragma once
// DeepSeek-V4.1 attention of one layer over a chunk of tokens (dsv41-model.md §4-5, reference
// notes §2.1): own queries and window K=V (FP8-rounded), and for a compressed layer the shared
// compressed entries of its KV source, selected by the latest index source. KV sources pool their
// groups (ratio 2: softmax-gated pairs; ratio 1: every token) into entries and indexer keys; index
// sources score them and publish a selection, the candidate source also its candidate blocks.
#include <cstdint>
#include <optional>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/cpu_ops.h"
#include "frank/engine/rope.h"
#include "frank/engine/v41_session.h"
#include "frank/model/config_v41.h"
#include "frank/model/weights_v41.h"

namespace frank::engine {

// What the layers of one forward call hand on to later layers (transformers' per-call `shared`
// dict): the latest KV source's entries and their ratio, the latest key owner's indexer keys, the
// latest index source's selection (nullopt: none, so its layers attend no entry) and the candidate
// source's block masks.
struct V41Shared {
  const V41SourceState* entries = nullptr;
  int entries_ratio = 0;
  const V41SourceState* keys = nullptr;
  std::optional<std::vector<std::vector<int32_t>>> selection;  // per token: entry indices
  std::optional<std::vector<std::vector<uint8_t>>> candidates;  // per token: per entry, 1 = candidate
};

// The two rotary tables: "main" for sliding-only layers, "compress" for the rest (also entries,
// indexer keys and queries).
struct V41Ropes {
  RopeTable main, compress;
};

// x: [n, hidden] attention input (after input_layernorm) of the tokens at positions start ..
// start+n-1. Updates the layer's window ring and, for a KV source, its source state; reads and
// writes `shared`. Returns [n, hidden].
Tensor v41_attention(const CpuOps& ops, const model::V41Config& c, const model::V41AttentionWeights& w, int layer,
                     const V41Ropes& ropes, const Tensor& x, int64_t start, V41Session& session, V41Shared& shared);

}  // namespace frank::engine
