#pragma once
// V4.1's DSpark drafter (dsv41-model.md §8; the fixture's choices: tools/reference/README.md "DeepSeek-V4.1
// DSpark fixture"), written over a backend's ops like the main model (v41_decoder_layer.h):
//   main_x = main_norm(main_proj(F_t))                  F_t: the target features of position t
//   ctx_s  = FP8(rope_main(kv_norm_s(wkv_s main_x_t)))  into stage s's ring, for every position t
//   block  = [x_{p+1}, noise x (B-1)] at positions p+1 .. p+B, embedded, copied to every stream
//   X, pre = stage_s(X, pre), s = 0 .. S-1              single-pass mHC, pre carried across stages;
//            keys of every block row: ctx_s rows (p-W, p] and all B block rows (bidirectional)
//   h = sum_k pre_k X_k;  base = head(norm(h))
// then the Markov chaining and confidence on h and base (dspark_chain):
//   logits_j = base_j + markov_head(markov_embed(prev_j)),  prev_0 = x_{p+1},  prev_{j+1} = argmax logits_j
//   confidence_j = sigmoid(confidence_head([h_j ; markov_embed(prev_j)]))
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "frank/engine/v41_attention_forward.h"
#include "frank/engine/v41_decoder_layer.h"
#include "frank/model/weights_v41.h"

namespace frank::engine {

// Writes every stage's context rows of the target features `features` [n, n_targets * hidden] of
// positions state.position .. into its ring, and advances state.position.
template <class Ops>
void dspark_context(Ops& ops, const model::V41Config& c, const model::DSparkWeights& w, const V41Ropes& ropes,
                    const typename Ops::Array& features, typename Ops::DSparkState& state) {
  typename Ops::Array main_x = ops.linear(features, w.main_proj);
  ops.rms_norm(main_x, c.hidden_size, &w.main_norm, c.rms_norm_eps);
  for (size_t s = 0; s < w.stages.size(); ++s) {
    // No attn_norm before wkv: the stage's K=V projection reads main_x directly.
    const typename Ops::Array kv = v41_window_kv(ops, c, w.stages[s].attn, ropes.main, main_x, state.position);
    ops.window_store(state.rings[s], kv, state.position, c.sliding_window);
  }
  state.position += features.rows();
}

// The stages over the block `ids` at positions state.position .. (the anchor p = state.position - 1):
// returns {h [B, hidden], base logits [B, vocab]}. Reads the rings, changes nothing.
template <class Ops>
std::pair<typename Ops::Array, typename Ops::Array> dspark_backbone(Ops& ops, const model::V41Config& c,
                                                                    const model::V41Weights& main,
                                                                    const V41Ropes& ropes,
                                                                    const typename Ops::DSparkState& state,
                                                                    const typename Ops::Ids& ids) {
  using Array = typename Ops::Array;
  using Mix = typename Ops::Mix;
  const model::DSparkWeights& w = *main.dspark;
  const model::V41Config sc = c.dspark_stage();
  const int64_t start = state.position;
  Array streams = ops.embed(main.embed, ids, c.hc_mult);
  std::optional<Mix> last;  // none before the first site: the first collapse is stream 0
  for (size_t s = 0; s < w.stages.size(); ++s) {
    const model::DSparkStageWeights& S = w.stages[s];
    Mix attn = v41_hc_site(ops, sc, S.attn_hc, S.attn_norm, streams, last ? &*last : nullptr, [&](const auto& x) {
      const Array q = v41_queries(ops, sc, S.attn, ropes.main, x, start).first;
      const Array kv = v41_window_kv(ops, sc, S.attn, ropes.main, x, start);
      return v41_output(ops, sc, S.attn,
                        ops.attend_block(q, kv, state.rings[s], start, c.sliding_window, S.attn.sinks, ropes.main));
    });
    last = v41_hc_site(ops, sc, S.ffn_hc, S.ffn_norm, streams, &attn,
                       [&](const auto& x) { return ops.moe_v41(sc, S.moe, x, ids); });
  }
  Array h = ops.hc_sum(streams, last ? &*last : nullptr, 0, c);
  Array normed = h;
  ops.rms_norm(normed, c.hidden_size, &w.norm, c.rms_norm_eps);
  Array base = ops.linear(normed, main.head);
  return {std::move(h), std::move(base)};
}

// The chained block: logits [B, vocab] (Markov term included), the drafts d_1 .. d_B (each row's
// argmax) and the confidence logits z [B, 1] (confidence_j = dspark_confidence(z_j)).
template <class Ops>
struct DSparkChain {
  typename Ops::Array logits;
  typename Ops::Ids tokens;
  typename Ops::Array z;
};

// The Markov chain of the block from the backbone's h [B, hidden] and base [B, vocab], prev_0 =
// `first` (one id). Step j needs step j-1's argmax, so each step runs on one row; the confidence
// head then reads every [h_j ; markov_embed(prev_j)] at once.
template <class Ops>
DSparkChain<Ops> dspark_chain(Ops& ops, const model::DSparkWeights& w, const typename Ops::Array& h,
                              const typename Ops::Array& base, typename Ops::Ids first) {
  using Array = typename Ops::Array;
  std::vector<Array> rows, marks;  // per step: logits_j, markov_embed(prev_j)
  typename Ops::Ids prev = std::move(first);
  for (int64_t j = 0; j < base.rows(); ++j) {
    Array m = ops.embed(w.markov_embed, prev, 1);
    Array row = ops.rows(base, j, 1);
    ops.add_to_streams(row, ops.linear(m, w.markov_head), 1);
    prev = ops.argmax_rows(row);
    rows.push_back(std::move(row));
    marks.push_back(std::move(m));
  }
  Array logits = ops.stack_rows(rows);
  typename Ops::Ids tokens = ops.argmax_rows(logits);  // the steps' argmaxes again: the same rows
  Array z = ops.linear(ops.concat_cols(h, ops.stack_rows(marks)), w.confidence);
  return {std::move(logits), std::move(tokens), std::move(z)};
}

inline float dspark_confidence(float z) { return 1.0f / (1.0f + std::exp(-z)); }

}  // namespace frank::engine
