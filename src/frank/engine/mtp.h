#pragma once
// DeepSeek-V4's multi-token-prediction block (dsv4-model.md §7) on the CPU reference. Slot t reads
// the main model's residual streams H_t at position t (before its hyper-head) and the token at t+1,
// and predicts the token at t+2 (the math: mtp_forward.h, shared with the CUDA backend's block).
// Drafting chains it: the output streams X of one slot are the H of the next.
#include <cstdint>
#include <span>

#include "frank/core/tensor.h"
#include "frank/engine/attention.h"
#include "frank/engine/session.h"
#include "frank/model/weights.h"

namespace frank::engine {

// The block's own state: its sliding window, and how many slots it has consumed.
struct MtpState {
  int64_t position = 0;
  LayerState layer;
};

class MtpBlock {
 public:
  MtpBlock(const model::ModelConfig& c, const model::ModelWeights& w, const RopeTable& main_rope,
           const RopeTable& compress_rope);

  MtpState new_state() const;

  struct Output {
    Tensor logits;   // [n, vocab]
    Tensor streams;  // [n, hc_mult * hidden], before the block's hyper-head
  };
  // Slots state.position .. +n-1: `streams` [n, hc_mult * hidden] are their H, `next_tokens` the
  // tokens after each slot's position. Advances the state.
  Output forward(MtpState& state, const Tensor& streams, std::span<const int32_t> next_tokens) const;

  // Throws frank::Error unless the streams have one row of main-model streams per next token and
  // the tokens whose ids are known on the host (`ids`: all, or none for drafts chosen on a GPU)
  // are in the vocabulary. Every backend's block checks its input so.
  void check_input(int64_t stream_rows, int64_t stream_cols, int64_t tokens, std::span<const int32_t> ids) const;

  const model::ModelConfig& config() const { return c_; }
  const model::ModelWeights& weights() const { return w_; }
  const model::MtpWeights& mtp_weights() const { return m_; }
  const Attention& attention() const { return attention_; }

 private:
  const model::ModelConfig& c_;
  const model::ModelWeights& w_;
  const model::MtpWeights& m_;
  Attention attention_;
};

}  // namespace frank::engine
