#pragma once
// The KV compressor of CSA and HCA layers (dsv4-model.md §5.2-5.3). Every `ratio` tokens close a
// window, which becomes one compressed entry: a softmax-gated, per-channel pool of the tokens'
// projections, then RMSNorm, then RoPE at position window*ratio.
//
// HCA pools the window's own `ratio` tokens. CSA ("overlapping") projects each token to two halves
// Ca | Cb and pools 2*ratio slots: Ca of the previous window's tokens and Cb of this window's; the
// first window's Ca slots are empty (kv 0, gate -inf, weight 0).
#include <cstdint>
#include <vector>

#include "frank/engine/rope.h"
#include "frank/model/weights.h"

namespace frank::engine {

// Everything a compressor carries between tokens (and so between calls): this is the recurrent
// state a session must keep, roll back or snapshot.
struct CompressorState {
  std::vector<float> pending_kv, pending_gate;  // raw projections of the open window's tokens, no position bias
  int pending = 0;                               // tokens in the open window
  std::vector<float> overlap_kv, overlap_gate;  // CSA: Ca half of the last closed window, gate incl. position bias
  bool has_overlap = false;
  std::vector<float> entries;  // [n_entries, dim], post-norm, post-RoPE
  int64_t n_entries = 0;
};

class Compressor {
 public:
  // `overlapping` selects the CSA layout (two halves per token).
  Compressor(const model::CompressorWeights& w, int ratio, int dim, bool overlapping, float eps, const RopeTable& rope);

  int dim() const { return dim_; }
  int ratio() const { return ratio_; }
  int projection_width() const { return halves_ * dim_; }
  const model::CompressorWeights& weights() const { return w_; }
  float eps() const { return eps_; }
  const RopeTable& rope() const { return rope_; }

  // Adds one token's raw projections (kv, gate: projection_width() each). Returns true when the token
  // closed a window and a new entry was appended to state.entries.
  bool push(CompressorState& state, const float* kv, const float* gate) const;

 private:
  void emit(CompressorState& state) const;

  const model::CompressorWeights& w_;
  int ratio_, dim_, halves_;
  float eps_;
  const RopeTable& rope_;
};

}  // namespace frank::engine
