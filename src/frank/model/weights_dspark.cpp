#include "frank/model/weights_dspark.h"

#include <fmt/format.h>

#include "frank/model/weights_visit.h"

namespace frank::model {

using namespace weights_visit;

void for_each_dspark_weight(const V41Config& c, DSparkWeights& w, const Visit& visit) {
  const V41Config stage = c.dspark_stage();  // the stage MoE's expert count
  const DSparkConfig& d = *c.dspark;
  const int D = c.hidden_size;
  visit(linear_slot("mtp.0.main_proj.weight", Shape{D, int64_t{D} * static_cast<int64_t>(d.target_layers.size())},
                    w.main_proj));
  visit({"mtp.0.main_norm.weight", Shape{D}, WeightRole::NormWeight, &w.main_norm});
  w.stages.resize(d.n_stages);
  for (int s = 0; s < d.n_stages; ++s) {
    const std::string p = fmt::format("mtp.{}.", s);
    auto& S = w.stages[s];
    visit_layer_norms_and_hc(stage, p, S.attn_norm, S.ffn_norm, S.attn_hc, S.ffn_hc, visit);
    visit_attention_core(stage, p, S.attn, visit);
    visit_moe(stage, p, /*hash_routed=*/false, S.moe, visit);
  }
  // The head pieces sit under the last stage's prefix (a guess of the fixture: §9 lists them unprefixed).
  const std::string last = fmt::format("mtp.{}.", d.n_stages - 1);
  visit({last + "norm.weight", Shape{D}, WeightRole::NormWeight, &w.norm});
  visit({last + "markov_head.embed.weight", Shape{c.vocab_size, d.markov_rank}, WeightRole::Embedding,
         &w.markov_embed});
  visit(linear_slot(last + "markov_head.head.weight", Shape{c.vocab_size, d.markov_rank}, w.markov_head));
  visit(linear_slot(last + "confidence_head.proj.weight", Shape{1, D + d.markov_rank}, w.confidence));
}

}  // namespace frank::model
