#pragma once
// DeepSeek-V4 attention (dsv4-model.md §4-5): one shared K=V head, low-rank queries with a per-head
// RMS norm, partial RoPE, a per-head sink logit, a sliding window of raw rows plus (CSA/HCA) the
// compressed entries, inverse RoPE on the output and a grouped output projection.
#include <cstdint>
#include <optional>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/compressor.h"
#include "frank/engine/rope.h"
#include "frank/engine/session.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::engine {

// o = sum_j p_j k_j with p = softmax over [q·k_j * scale ..., sink] without the sink column: the sink
// takes part in the max and the normaliser and then absorbs its share of probability.
void attend_with_sink(const float* q, const std::vector<const float*>& keys, float sink, int dim, float scale,
                      float* out);

class Attention {
 public:
  // Main layer `layer`, of the kind the config schedules for it.
  Attention(const model::ModelConfig& c, const model::AttentionWeights& w, int layer, const RopeTable& main_rope,
            const RopeTable& compress_rope);
  // A layer of a given kind (the MTP block's is sliding).
  Attention(const model::ModelConfig& c, const model::AttentionWeights& w, model::AttentionKind kind,
            int compress_ratio, const RopeTable& main_rope, const RopeTable& compress_rope);

  // x: [n, hidden] (the attention input, after input_layernorm) for the n tokens at positions
  // state-relative `start` .. start+n-1, consumed in order. Returns [n, hidden].
  Tensor forward(const Tensor& x, int64_t start, LayerState& state) const;

  // Moves `state` (this layer as it was before the last forward call of `after`, which started at
  // `start`) on by that call's first `keep` tokens: their window rows are copied from `after` and
  // their recorded projections pushed through the compressors again. Needs keep <= the call's
  // tokens <= sliding_window (a longer call has overwritten the rows it would copy).
  void replay(LayerState& state, const LayerState& after, int64_t start, int64_t keep) const;

 private:
  // The compressed entries token `pos` attends besides its window (HCA: all; CSA: the indexer's pick).
  std::vector<const float*> compressed_keys(const LayerState& state, const float* index_q, const float* index_w) const;
  Tensor grouped_output(const Tensor& heads) const;

  const model::ModelConfig& c_;
  const model::AttentionWeights& w_;
  model::AttentionKind kind_;
  const RopeTable& rope_;
  std::optional<Compressor> compressor_;
  std::optional<Compressor> index_compressor_;
};

}  // namespace frank::engine
