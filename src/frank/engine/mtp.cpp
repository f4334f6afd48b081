#include "frank/engine/mtp.h"

#include "frank/core/error.h"
#include "frank/engine/cpu_ops.h"
#include "frank/engine/mtp_forward.h"

namespace frank::engine {
namespace {

const model::MtpWeights& required_mtp_weights(const model::ModelWeights& w) {
  if (!w.mtp) throw Error("the checkpoint has no MTP block (mtp.0.*): speculative drafting needs it");
  return *w.mtp;
}

}  // namespace

MtpBlock::MtpBlock(const model::ModelConfig& c, const model::ModelWeights& w, const RopeTable& main_rope,
                   const RopeTable& compress_rope)
    : c_(c), w_(w), m_(required_mtp_weights(w)), attention_(c, m_.block.attn, model::AttentionKind::Sliding, 0, main_rope,
                                                   compress_rope) {}

MtpState MtpBlock::new_state() const {
  MtpState s;
  s.layer.window.assign(static_cast<size_t>(c_.sliding_window) * c_.head_dim, 0.0f);
  return s;
}

void MtpBlock::check_input(int64_t stream_rows, int64_t stream_cols, int64_t tokens,
                           std::span<const int32_t> ids) const {
  if (stream_rows != tokens || stream_cols != int64_t{c_.hc_mult} * c_.hidden_size)
    throw Error("MTP: one row of main-model streams per next token is needed");
  for (int32_t id : ids)
    if (id < 0 || id >= c_.vocab_size) throw Error("MTP: token id outside the vocabulary");
}

MtpBlock::Output MtpBlock::forward(MtpState& state, const Tensor& streams, std::span<const int32_t> next_tokens) const {
  check_input(streams.rows(), streams.cols(), std::ssize(next_tokens), next_tokens);
  CpuOps ops;
  Tensor x = streams;
  const std::vector<int32_t> tokens(next_tokens.begin(), next_tokens.end());
  Tensor logits = mtp_forward(ops, c_, w_, m_, attention_, x, state.position, state.layer, tokens);
  state.position += std::ssize(next_tokens);
  return {std::move(logits), std::move(x)};
}

}  // namespace frank::engine
