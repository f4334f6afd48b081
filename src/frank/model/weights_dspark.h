#pragma once
// The DSpark drafter's tensors (dsv41-model.md §8-9, released `mtp.*` names as the fixture
// tools/reference/make_dspark_fixture.py writes them): the feature projection, the stages (each a
// sliding-only V4.1 block: norms, two mHC sites, attention core, MoE with gate.bias and no bias_vl),
// the final norm, the Markov head and the confidence head. Embedding and head are the main model's.
#include <functional>
#include <vector>

#include "frank/model/config_v41.h"
#include "frank/model/weights.h"

namespace frank::model {

struct DSparkStageWeights {
  Tensor attn_norm, ffn_norm;
  HyperConnectionWeights attn_hc, ffn_hc;
  AttentionCoreWeights attn;
  MoeWeights moe;
};

struct DSparkWeights {
  LinearWeight main_proj;  // mtp.0.main_proj [hidden, n_targets * hidden]
  Tensor main_norm;        // mtp.0.main_norm [hidden]
  std::vector<DSparkStageWeights> stages;
  Tensor norm;                 // mtp.{S-1}.norm [hidden], before the shared head
  Tensor markov_embed;         // mtp.{S-1}.markov_head.embed [vocab, rank]
  LinearWeight markov_head;    // mtp.{S-1}.markov_head.head [vocab, rank]
  LinearWeight confidence;     // mtp.{S-1}.confidence_head.proj [1, hidden + rank]
};

// Lays out `w` for `config` (which must have config.dspark) and calls `visit` once per tensor, named by
// its released key. Existing values are kept.
void for_each_dspark_weight(const V41Config& config, DSparkWeights& w,
                            const std::function<void(const WeightSlot&)>& visit);

}  // namespace frank::model
