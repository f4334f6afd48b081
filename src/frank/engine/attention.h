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
  // state-relative `start` .. start+n-1, consumed in order. Returns [n, hidden]. The CPU reference
  // (attention_forward with CpuOps); the model runs attention_forward over its backend's ops.
  Tensor forward(const Tensor& x, int64_t start, LayerState& state) const;

  const model::ModelConfig& config() const { return c_; }
  const model::AttentionWeights& weights() const { return w_; }
  model::AttentionKind kind() const { return kind_; }
  const RopeTable& rope() const { return rope_; }
  const std::optional<Compressor>& compressor() const { return compressor_; }
  const std::optional<Compressor>& index_compressor() const { return index_compressor_; }

  // Moves `state` (this layer as it was before the last forward call of `after`, which started at
  // `start`) on by that call's first `keep` tokens: their window rows are copied from `after` and
  // their recorded projections pushed through the compressors again. Needs keep <= the call's
  // tokens <= sliding_window (a longer call has overwritten the rows it would copy).
  void replay(LayerState& state, const LayerState& after, int64_t start, int64_t keep) const;

 private:
  const model::ModelConfig& c_;
  const model::AttentionWeights& w_;
  model::AttentionKind kind_;
  const RopeTable& rope_;
  std::optional<Compressor> compressor_;
  std::optional<Compressor> index_compressor_;
};

}  // namespace frank::engine
