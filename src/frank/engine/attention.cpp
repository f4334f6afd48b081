#include "frank/engine/attention.h"

#include <algorithm>
#include <cmath>

#include "frank/core/error.h"
#include "frank/cpu/ops.h"
#include "frank/engine/attention_forward.h"
#include "frank/engine/cpu_ops.h"

namespace frank::engine {
using model::AttentionKind;

void attend_with_sink(const float* q, const std::vector<const float*>& keys, float sink, int dim, float scale,
                      float* out) {
  const size_t n = keys.size();
  std::vector<float> logits(n);
  float mx = sink;
  for (size_t j = 0; j < n; ++j) {
    logits[j] = static_cast<float>(cpu::dot(q, keys[j], dim)) * scale;
    mx = std::max(mx, logits[j]);
  }
  double denom = std::exp(sink - mx);
  for (size_t j = 0; j < n; ++j) {
    logits[j] = std::exp(logits[j] - mx);
    denom += logits[j];
  }
  for (int d = 0; d < dim; ++d) {
    double s = 0.0;
    for (size_t j = 0; j < n; ++j) s += static_cast<double>(static_cast<float>(logits[j] / denom)) * keys[j][d];
    out[d] = static_cast<float>(s);
  }
}

Attention::Attention(const model::ModelConfig& c, const model::AttentionWeights& w, int layer,
                     const RopeTable& main_rope, const RopeTable& compress_rope)
    : Attention(c, w, c.attention[layer], c.compress_ratio[layer], main_rope, compress_rope) {}

Attention::Attention(const model::ModelConfig& c, const model::AttentionWeights& w, AttentionKind kind,
                     int compress_ratio, const RopeTable& main_rope, const RopeTable& compress_rope)
    : c_(c), w_(w), kind_(kind), rope_(kind_ == AttentionKind::Sliding ? main_rope : compress_rope) {
  if (kind_ != AttentionKind::Sliding)
    compressor_.emplace(*w.compressor, compress_ratio, c.head_dim, kind_ == AttentionKind::CompressedSparse,
                        c.rms_norm_eps, compress_rope);
  if (kind_ == AttentionKind::CompressedSparse)
    index_compressor_.emplace(w.indexer->compressor, compress_ratio, c.index_head_dim, true, c.rms_norm_eps,
                              compress_rope);
}

Tensor Attention::forward(const Tensor& x, int64_t start, LayerState& state) const {
  CpuOps ops;
  return attention_forward(ops, *this, x, start, state);
}

void Attention::replay(LayerState& state, const LayerState& after, int64_t start, int64_t keep) const {
  const int W = c_.sliding_window, hd = c_.head_dim;
  const CallRecord& call = after.last_call;
  if ((compressor_ && call.compressor_kv.rows() < keep) || (index_compressor_ && call.indexer_kv.rows() < keep))
    throw Error("rewind: the last call's record does not cover the tokens to keep");
  for (int64_t t = 0; t < keep; ++t) {
    const int64_t row = (start + t) % W;
    std::copy_n(after.window.begin() + row * hd, hd, state.window.begin() + row * hd);
    if (compressor_) compressor_->push(state.compressor, call.compressor_kv.row(t), call.compressor_gate.row(t));
    if (index_compressor_) index_compressor_->push(state.indexer, call.indexer_kv.row(t), call.indexer_gate.row(t));
  }
}

}  // namespace frank::engine
