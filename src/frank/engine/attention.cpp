#include "frank/engine/attention.h"

#include <algorithm>
#include <cmath>

#include "frank/core/error.h"
#include "frank/cpu/ops.h"
#include "frank/engine/indexer.h"

namespace frank::engine {
namespace {

using model::AttentionKind;

float inverse_sqrt(int n) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(n))); }

// Applies RoPE (at `start + t`) to each of the `heads` vectors of width `dim` in every row t of x.
void rope_rows(Tensor& x, int heads, int dim, int64_t start, const RopeTable& rope) {
  for (int64_t t = 0; t < x.rows(); ++t)
    for (int h = 0; h < heads; ++h) rope.apply(x.row(t) + int64_t{h} * dim, dim, start + t);
}

}  // namespace

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

std::vector<const float*> Attention::compressed_keys(const LayerState& state, const float* index_q,
                                                     const float* index_w) const {
  std::vector<const float*> keys;
  if (kind_ == AttentionKind::Sliding) return keys;
  const auto& entries = state.compressor;
  // Processing tokens in order, every entry emitted so far is visible: entry w exists exactly when
  // w < (t+1) / ratio.
  if (kind_ == AttentionKind::HeavilyCompressed) {
    for (int64_t e = 0; e < entries.n_entries; ++e) keys.push_back(entries.entries.data() + e * c_.head_dim);
    return keys;
  }
  const auto scores = indexer_scores(index_q, index_w, c_.index_n_heads, c_.index_head_dim,
                                     state.indexer.entries.data(), state.indexer.n_entries);
  for (int64_t e : top_k_indices(scores, c_.index_topk)) keys.push_back(entries.entries.data() + e * c_.head_dim);
  return keys;
}

Tensor Attention::forward(const Tensor& x, int64_t start, LayerState& state) const {
  const int64_t n = x.rows();
  const int H = c_.num_heads, hd = c_.head_dim;

  // Queries: q_a -> weighted RMSNorm (the "q residual", also the indexer's input) -> q_b -> per-head
  // unweighted RMSNorm -> RoPE.
  Tensor q_residual = cpu::linear(x, w_.q_a_proj);
  for (int64_t t = 0; t < n; ++t) cpu::rms_norm(q_residual.row(t), c_.q_lora_rank, w_.q_a_norm.data.data(), c_.rms_norm_eps);
  Tensor q = cpu::linear(q_residual, w_.q_b_proj);
  for (int64_t t = 0; t < n; ++t)
    for (int h = 0; h < H; ++h) cpu::rms_norm(q.row(t) + int64_t{h} * hd, hd, nullptr, c_.rms_norm_eps);
  rope_rows(q, H, hd, start, rope_);

  // The single K=V row per token.
  Tensor kv = cpu::linear(x, w_.kv_proj);
  for (int64_t t = 0; t < n; ++t) cpu::rms_norm(kv.row(t), hd, w_.kv_norm.data.data(), c_.rms_norm_eps);
  rope_rows(kv, 1, hd, start, rope_);

  Tensor comp_kv, comp_gate, index_kv, index_gate, index_q, index_w;
  if (compressor_) {
    comp_kv = cpu::linear(x, w_.compressor->kv_proj);
    comp_gate = cpu::linear(x, w_.compressor->gate_proj);
  }
  if (index_compressor_) {
    const auto& ix = *w_.indexer;
    index_kv = cpu::linear(x, ix.compressor.kv_proj);
    index_gate = cpu::linear(x, ix.compressor.gate_proj);
    index_q = cpu::linear(q_residual, ix.q_b_proj);
    rope_rows(index_q, c_.index_n_heads, c_.index_head_dim, start, rope_);
    index_w = cpu::linear(x, ix.weights_proj);
    const float weight_scale = inverse_sqrt(c_.index_n_heads);
    for (auto& v : index_w.data) v *= weight_scale;
  }

  const int W = c_.sliding_window;
  const float scale = inverse_sqrt(hd);
  Tensor heads({n, int64_t{H} * hd});
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = start + t;
    std::copy(kv.row(t), kv.row(t) + hd, state.window.begin() + (pos % W) * hd);
    if (compressor_) compressor_->push(state.compressor, comp_kv.row(t), comp_gate.row(t));
    if (index_compressor_) index_compressor_->push(state.indexer, index_kv.row(t), index_gate.row(t));

    // Window rows (pos-W, pos], oldest first, then the compressed entries.
    std::vector<const float*> keys;
    for (int64_t p = std::max<int64_t>(0, pos - W + 1); p <= pos; ++p) keys.push_back(state.window.data() + (p % W) * hd);
    const auto extra = compressed_keys(state, index_compressor_ ? index_q.row(t) : nullptr,
                                       index_compressor_ ? index_w.row(t) : nullptr);
    keys.insert(keys.end(), extra.begin(), extra.end());

    for (int h = 0; h < H; ++h) {
      float* o = heads.row(t) + int64_t{h} * hd;
      attend_with_sink(q.row(t) + int64_t{h} * hd, keys, w_.sinks.data[h], hd, scale, o);
      rope_.apply(o, hd, pos, /*inverse=*/true);  // K=V carried RoPE into the values: undo it at the query
    }
  }
  state.last_call = {std::move(comp_kv), std::move(comp_gate), std::move(index_kv), std::move(index_gate), {}};
  return grouped_output(heads);
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

// Heads are split into o_groups contiguous groups; group g goes through rows
// [g*o_lora, (g+1)*o_lora) of o_a_proj, the concatenation through o_b_proj.
Tensor Attention::grouped_output(const Tensor& heads) const {
  const int64_t n = heads.rows();
  const int G = c_.o_groups, R = c_.o_lora_rank;
  const int64_t group_in = heads.cols() / G;
  Tensor low({n, int64_t{G} * R});
  for (int64_t t = 0; t < n; ++t)
    for (int g = 0; g < G; ++g)
      cpu::linear_rows(heads.row(t) + g * group_in, 1, w_.o_a_proj, int64_t{g} * R, int64_t{g + 1} * R,
                       low.row(t) + int64_t{g} * R);
  return cpu::linear(low, w_.o_b_proj);
}

}  // namespace frank::engine
