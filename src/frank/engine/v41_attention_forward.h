#pragma once
// DeepSeek-V4.1 attention of one layer over a chunk of tokens (dsv41-model.md §4-5, reference
// notes §2.1), written once over a backend's ops (CpuOps, the fp32 reference; docs/architecture.md
// lists what each op must do): own queries and window K=V (FP8-rounded), and for a compressed layer
// the shared compressed entries of its KV source, selected by the latest index source. KV sources
// pool their groups (ratio 2: softmax-gated pairs; ratio 1: every token) into entries and indexer
// keys; index sources score them and publish a selection, the candidate source also its candidate
// blocks.
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>

#include "frank/engine/fake_quant.h"
#include "frank/engine/rope.h"
#include "frank/model/config_v41.h"
#include "frank/model/weights_v41.h"

namespace frank::engine {

inline constexpr int kWindowQuantBlock = 32;  // window K=V: FP8, one ue8m0 scale per 32 values
inline constexpr int kEntryQuantBlock = 16;   // compressed entries: FP4, one e4m3 scale per 16 values
inline constexpr int kIndexQuantBlock = 32;   // indexer queries and keys: FP4, one ue8m0 scale per 32 values

// The two rotary tables: "main" for sliding-only layers, "compress" for the rest (also entries,
// indexer keys and queries).
struct V41Ropes {
  RopeTable main, compress;
};

// What the layers of one forward call hand on to later layers (transformers' per-call `shared`
// dict): the latest KV source's entries and their ratio, the latest key owner's indexer keys, the
// latest index source's selection (nullopt: none, so its layers attend no entry) and the candidate
// source's block masks.
template <class Ops>
struct V41Shared {
  const typename Ops::V41Source* entries = nullptr;
  int entries_ratio = 0;
  const typename Ops::V41Source* keys = nullptr;
  std::optional<typename Ops::Selection> selection;
  std::optional<typename Ops::Candidates> candidates;
};

// Queries of the tokens at positions start ..: q_a -> weighted RMSNorm (the q residual, also the
// indexer's input) -> q_b -> RoPE (no per-head norm in V4.1). Returns {q, q residual}.
template <class Ops>
std::pair<typename Ops::Array, typename Ops::Array> v41_queries(Ops& ops, const model::V41Config& c,
                                                                const model::AttentionCoreWeights& w,
                                                                const RopeTable& rope, const typename Ops::Array& x,
                                                                int64_t start) {
  typename Ops::Array q_residual = ops.linear(x, w.q_a_proj);
  ops.rms_norm(q_residual, c.q_lora_rank, &w.q_a_norm, c.rms_norm_eps);
  typename Ops::Array q = ops.linear(q_residual, w.q_b_proj);
  ops.rope(q, c.num_heads, c.head_dim, start, rope, /*inverse=*/false);
  return {std::move(q), std::move(q_residual)};
}

// The single K=V row of each of x's rows (positions start ..): weighted RMSNorm, RoPE, then FP8 over
// all of it (RoPE dims included), before the token attends to itself.
template <class Ops>
typename Ops::Array v41_window_kv(Ops& ops, const model::V41Config& c, const model::AttentionCoreWeights& w,
                                  const RopeTable& rope, const typename Ops::Array& x, int64_t start) {
  typename Ops::Array kv = ops.linear(x, w.kv_proj);
  ops.norm_rope(kv, 1, c.head_dim, &w.kv_norm, c.rms_norm_eps, start, rope);
  ops.fake_quant(kv, c.head_dim, FakeQuant::Fp8Ue8m0, kWindowQuantBlock);
  return kv;
}

// The grouped output projection of the attention heads [n, heads * head_dim]: wo_a per group, wo_b.
template <class Ops>
typename Ops::Array v41_output(Ops& ops, const model::V41Config& c, const model::AttentionCoreWeights& w,
                               const typename Ops::Array& heads) {
  const typename Ops::Array low = ops.grouped_linear(heads, w.o_a_proj, c.o_groups);
  return ops.linear(low, w.o_b_proj);
}

// A KV source's part: pools the chunk into the latents of the groups it closes (kv_norm'ed, before
// RoPE), then publishes for each group, at the group's first position g * ratio, its entry
// FP4(rope(latent)) and (a key owner) its indexer key FP4(rope(k_norm(wk · latent))).
template <class Ops>
void v41_publish_groups(Ops& ops, const model::V41Config& c, const model::V41AttentionWeights& w, int ratio,
                        const RopeTable& rope, const typename Ops::Array& x, int64_t start,
                        typename Ops::V41Source& source) {
  using Array = typename Ops::Array;
  const model::V41CompressorWeights& cw = *w.compressor;
  const Array kv = ops.linear(x, cw.kv_proj);
  const Array gate = cw.gate_proj ? ops.linear(x, *cw.gate_proj) : Array();
  Array entries = ops.pool_groups(source, kv, cw.gate_proj ? &gate : nullptr, ratio, start);
  ops.rms_norm(entries, c.head_dim, &cw.norm, c.rms_norm_eps);
  const int64_t first_group = start / ratio;
  Array keys;
  const bool key_owner = w.indexer && w.indexer->k_proj;
  if (key_owner) {
    keys = ops.linear(entries, *w.indexer->k_proj);
    ops.rms_norm(keys, c.index_head_dim, &w.indexer->k_norm, c.rms_norm_eps);
    ops.rope(keys, 1, c.index_head_dim, first_group, rope, /*inverse=*/false, ratio);
    ops.fake_quant(keys, c.index_head_dim, FakeQuant::Fp4Ue8m0, kIndexQuantBlock);
  }
  ops.rope(entries, 1, c.head_dim, first_group, rope, /*inverse=*/false, ratio);
  ops.fake_quant(entries, c.head_dim, FakeQuant::Fp4E4m3, kEntryQuantBlock);
  ops.publish(source, entries, key_owner ? &keys : nullptr);
}

// An index source's selection for every token of the chunk (dsv41-model.md §5.2): FP4 queries
// against the shared keys, each entry visible once its group has closed, the candidate source's
// block mask applied at later index sources, then the top index_topk.
template <class Ops>
void v41_index_select(Ops& ops, const model::V41Config& c, const model::V41IndexerWeights& w, int layer,
                      const RopeTable& rope, const typename Ops::Array& x, const typename Ops::Array& q_residual,
                      int64_t start, V41Shared<Ops>& shared) {
  using Array = typename Ops::Array;
  const bool candidate_source = layer == c.candidate_source_layer;
  const bool uses_candidates = c.candidate_source_layer >= 0 && c.candidate_source_layer < layer && !candidate_source;
  if (shared.keys == nullptr || shared.keys->n_entries == 0) {
    shared.selection.reset();
    if (candidate_source) shared.candidates.reset();
    return;
  }
  const int heads = c.index_n_heads, kd = c.index_head_dim;
  Array q = ops.linear(q_residual, w.q_b_proj);
  ops.rope(q, heads, kd, start, rope, /*inverse=*/false);
  ops.fake_quant(q, kd, FakeQuant::Fp4Ue8m0, kIndexQuantBlock);
  Array weights = ops.linear(x, w.weights_proj);
  ops.scale(weights, static_cast<float>(std::pow(static_cast<double>(heads), -0.5)));

  const Array scores = ops.index_scores(q, weights, *shared.keys);
  const int ratio = shared.entries_ratio;
  if (candidate_source)
    shared.candidates = ops.candidate_blocks(scores, start, ratio, c.candidate_topk_blocks, c.candidate_block_size);
  const bool masked = uses_candidates && shared.candidates.has_value();
  shared.selection = ops.select_entries(scores, start, ratio, masked ? &*shared.candidates : nullptr, c.index_topk);
}

// x: [n, hidden] attention input (after input_layernorm) of the tokens at positions start ..
// start+n-1. Updates the layer's window ring and, for a KV source, its source state; reads and
// writes `shared`. Returns [n, hidden].
template <class Ops>
typename Ops::Array v41_attention_forward(Ops& ops, const model::V41Config& c, const model::V41AttentionWeights& w,
                                          int layer, const V41Ropes& ropes, const typename Ops::Array& x,
                                          int64_t start, typename Ops::V41Session& session, V41Shared<Ops>& shared) {
  using Array = typename Ops::Array;
  const int W = c.sliding_window;
  const int ratio = c.compress_ratio[layer];
  const RopeTable& rope = ratio > 0 ? ropes.compress : ropes.main;

  auto [q, q_residual] = v41_queries(ops, c, w, rope, x, start);
  Array kv = v41_window_kv(ops, c, w, rope, x, start);

  if (ratio > 0) {
    if (w.compressor) {
      typename Ops::V41Source& source = *session.sources[layer];
      v41_publish_groups(ops, c, w, ratio, ropes.compress, x, start, source);
      shared.entries = &source;
      shared.entries_ratio = ratio;
      if (w.indexer) shared.keys = &source;
    }
    if (w.indexer) v41_index_select(ops, c, *w.indexer, layer, ropes.compress, x, q_residual, start, shared);
  }

  // A sliding-only layer, or one before any index source has selected, attends its window alone.
  const bool with_entries = ratio > 0 && shared.entries != nullptr && shared.selection.has_value();
  auto& window = session.windows[layer];
  // K=V carried RoPE into the values: attend_v41 undoes it at the query's position.
  const Array heads = ops.attend_v41(q, kv, window, start, W, w.sinks, rope, with_entries ? shared.entries : nullptr,
                                     with_entries ? &*shared.selection : nullptr);
  ops.window_store(window, kv, start, W);
  return v41_output(ops, c, w, heads);
}

}  // namespace frank::engine
