#include "frank/engine/mtp.h"

#include "frank/core/error.h"
#include "frank/cpu/ops.h"
#include "frank/engine/decoder_layer.h"
#include "frank/engine/cpu_ops.h"

namespace frank::engine {
namespace {

const model::MtpWeights& mtp_weights(const model::ModelWeights& w) {
  if (!w.mtp) throw Error("the checkpoint has no MTP block (mtp.0.*): speculative drafting needs it");
  return *w.mtp;
}

}  // namespace

MtpBlock::MtpBlock(const model::ModelConfig& c, const model::ModelWeights& w, const RopeTable& main_rope,
                   const RopeTable& compress_rope)
    : c_(c), w_(w), m_(mtp_weights(w)), attention_(c, m_.block.attn, model::AttentionKind::Sliding, 0, main_rope,
                                                   compress_rope) {}

MtpState MtpBlock::new_state() const {
  MtpState s;
  s.layer.window.assign(static_cast<size_t>(c_.sliding_window) * c_.head_dim, 0.0f);
  return s;
}

MtpBlock::Output MtpBlock::forward(MtpState& state, const Tensor& streams, std::span<const int32_t> next_tokens) const {
  const int64_t n = static_cast<int64_t>(next_tokens.size());
  const int D = c_.hidden_size, N = c_.hc_mult;
  if (streams.rows() != n || streams.cols() != int64_t{N} * D)
    throw Error("MTP: one row of main-model streams per next token is needed");
  for (int32_t id : next_tokens)
    if (id < 0 || id >= c_.vocab_size) throw Error("MTP: token id outside the vocabulary");

  // The block's input streams: the projected embedding of the next token on every stream, plus
  // each normalised main stream projected.
  Tensor x({n, int64_t{N} * D});
  std::vector<float> e(static_cast<size_t>(D)), e_proj(static_cast<size_t>(D)), h(static_cast<size_t>(D)),
      h_proj(static_cast<size_t>(D));
  for (int64_t t = 0; t < n; ++t) {
    std::copy_n(w_.embed.row(next_tokens[static_cast<size_t>(t)]), D, e.begin());
    cpu::rms_norm(e.data(), D, m_.enorm.data.data(), c_.rms_norm_eps);
    cpu::linear(e.data(), 1, m_.e_proj, e_proj.data());
    for (int j = 0; j < N; ++j) {
      std::copy_n(streams.row(t) + int64_t{j} * D, D, h.begin());
      cpu::rms_norm(h.data(), D, m_.hnorm.data.data(), c_.rms_norm_eps);
      cpu::linear(h.data(), 1, m_.h_proj, h_proj.data());
      float* out = x.row(t) + int64_t{j} * D;
      for (int d = 0; d < D; ++d) out[d] = e_proj[static_cast<size_t>(d)] + h_proj[static_cast<size_t>(d)];
    }
  }

  const std::vector<int32_t> tokens(next_tokens.begin(), next_tokens.end());  // the MoE is scored: unused
  CpuOps ops;
  decoder_layer(ops, c_, m_.block, attention_, /*hash_routed=*/false, x, state.position, state.layer, tokens);
  state.position += n;
  const Tensor hidden = ops.hyper_head(m_.hc_head, m_.norm, x, 0, c_);
  return {cpu::linear(hidden, w_.head), std::move(x)};
}

}  // namespace frank::engine
