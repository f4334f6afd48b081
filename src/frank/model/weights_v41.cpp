#include "frank/model/weights_v41.h"

#include <fmt/format.h>

#include "frank/model/weights_visit.h"

namespace frank::model {
namespace {

using namespace weights_visit;

void visit_compressed_branch(const V41Config& c, int l, const std::string& p, V41AttentionWeights& a,
                             const Visit& visit) {
  const int D = c.hidden_size, hd = c.head_dim;
  if (c.is_kv_source(l)) {
    if (!a.compressor) a.compressor.emplace();
    auto& comp = *a.compressor;
    visit(linear_slot(p + "attn.compressor.wkv.weight", Shape{hd, D}, comp.kv_proj));
    if (c.compress_ratio[l] > 1) {  // ratio 1 pools nothing: no softmax gate
      if (!comp.gate_proj) comp.gate_proj.emplace();
      visit(linear_slot(p + "attn.compressor.wgate.weight", Shape{hd, D}, *comp.gate_proj));
    }
    visit({p + "attn.compressor.norm.weight", Shape{hd}, WeightRole::NormWeight, &comp.norm});
  }
  if (c.is_index_source(l)) {
    if (!a.indexer) a.indexer.emplace();
    auto& ix = *a.indexer;
    const int ihd = c.index_head_dim;
    visit(linear_slot(p + "attn.indexer.wq_b.weight", Shape{c.index_n_heads * ihd, c.q_lora_rank}, ix.q_b_proj));
    visit(linear_slot(p + "attn.indexer.weights_proj.weight", Shape{c.index_n_heads, D}, ix.weights_proj));
    if (c.is_kv_source(l)) {
      if (!ix.k_proj) ix.k_proj.emplace();
      visit(linear_slot(p + "attn.indexer.wk.weight", Shape{ihd, hd}, *ix.k_proj));
      visit({p + "attn.indexer.k_norm.weight", Shape{ihd}, WeightRole::NormWeight, &ix.k_norm});
    }
  }
}

void visit_engram(const V41Config& c, int k, const std::string& p, V41EngramWeights& e, const Visit& visit) {
  const auto& g = c.engram;
  const int D = c.hidden_size, N = c.hc_mult;
  visit({p + "engram.embed.weight", Shape{g.table_rows[k], g.head_dim}, WeightRole::Embedding, &e.table});
  visit(linear_slot(p + "engram.wkv.weight", Shape{int64_t{N + 1} * D, int64_t{g.hash_columns()} * g.head_dim}, e.wkv));
  // q_weight and k_weight start at 1, like norm weights.
  visit({p + "engram.q_weight", Shape{N, D}, WeightRole::NormWeight, &e.q_weight});
  visit({p + "engram.k_weight", Shape{N, D}, WeightRole::NormWeight, &e.k_weight});
}

}  // namespace

void for_each_v41_weight(const V41Config& c, V41Weights& w, const Visit& visit) {
  const int D = c.hidden_size;
  visit({"embed.weight", Shape{c.vocab_size, D}, WeightRole::Embedding, &w.embed});
  w.layers.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l);
    auto& L = w.layers[l];
    visit_layer_norms_and_hc(c, p, L.attn_norm, L.ffn_norm, L.attn_hc, L.ffn_hc, visit);
    visit_attention_core(c, p, L.attn, visit);
    visit_compressed_branch(c, l, p, L.attn, visit);
    visit_moe(c, p, /*hash_routed=*/false, L.moe, visit);
    visit({p + "ffn.gate.bias_vl", Shape{c.n_routed_experts}, WeightRole::SelectionBias, &L.image_selection_bias});
    if (const int k = c.engram.index_of(l); k >= 0) {
      if (!L.engram) L.engram.emplace();
      visit_engram(c, k, p, *L.engram, visit);
    }
  }
  visit({"norm.weight", Shape{D}, WeightRole::NormWeight, &w.norm});
  visit(linear_slot("head.weight", Shape{c.vocab_size, D}, w.head));
  if (w.dspark) for_each_dspark_weight(c, *w.dspark, visit);
}

}  // namespace frank::model
