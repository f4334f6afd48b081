#pragma once
// DSpark: V4.1's drafter on the CPU reference (dspark_forward.h over CpuOps), over a V41Model whose
// checkpoint ships it. observe() takes the target features of the positions the target has kept
// (V41Model::forward's `features`) into the context rings; draft() runs the block at the anchor
// p = state.position - 1 and chains the Markov head greedily (dsv41-model.md §8; dspark_chain):
//   logits_j = base_j + markov_head(markov_embed(prev_j)),  prev_0 = x_{p+1},  prev_{j+1} = argmax logits_j
//   confidence_j = sigmoid(confidence_head([h_j ; markov_embed(prev_j)]))
#include <cstdint>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/dspark_state.h"
#include "frank/engine/v41_model.h"

namespace frank::engine {

struct DSparkDraft {
  Tensor logits;                    // [B, vocab], Markov term included
  std::vector<int32_t> tokens;      // d_1 .. d_B
  std::vector<float> confidence;    // [B]
};

class DSpark {
 public:
  // Throws frank::Error when the model has no DSpark weights.
  explicit DSpark(const V41Model& model);

  const model::DSparkConfig& config() const { return *model_.config().dspark; }
  DSparkState new_state() const;
  // The context rows of `features` [n, n_targets * hidden] (positions state.position ..).
  void observe(DSparkState& state, const Tensor& features) const;
  // The block [first, noise ...] at positions state.position .. and its greedy drafts.
  DSparkDraft draft(const DSparkState& state, int32_t first) const;

 private:
  const V41Model& model_;
};

}  // namespace frank::engine
