#pragma once
// DeepSeek-V4's multi-token-prediction block (dsv4-model.md §7). Slot t reads the main model's
// residual streams H_t at position t (before its hyper-head) and the token at t+1, and predicts
// the token at t+2:
//   e  = RMSNorm_enorm(embed[token_{t+1}])
//   X  = e_proj(e) on every stream + h_proj(RMSNorm_hnorm(H_t[j])) per stream j
//   X  = decoder layer (sliding attention at RoPE position t, scored MoE) on X
//   logits = head · RMSNorm_norm(hyper_head_mtp(X))
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

 private:
  const model::ModelConfig& c_;
  const model::ModelWeights& w_;
  const model::MtpWeights& m_;
  Attention attention_;
};

}  // namespace frank::engine
