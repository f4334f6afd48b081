#include "frank/model/weights.h"

#include <fmt/format.h>

#include "frank/model/weights_visit.h"

namespace frank::model {
namespace weights_visit {

WeightSlot linear_slot(std::string name, Shape shape, LinearWeight& w) {
  return {std::move(name), std::move(shape), WeightRole::Linear, &w.dense, &w};
}

void visit_hc(const std::string& prefix, int n_out, int64_t in, HyperConnectionWeights& hc, int n_scales,
              const Visit& visit, const char* fn_name, const char* base_name, const char* scale_name) {
  visit({prefix + fn_name, Shape{n_out, in}, WeightRole::HcFn, &hc.fn});
  visit({prefix + base_name, Shape{n_out}, WeightRole::HcBase, &hc.base});
  visit({prefix + scale_name, Shape{n_scales}, WeightRole::HcScale, &hc.scale});
}

namespace {

void visit_expert(const std::string& p, int inter, int hidden, ExpertWeights& e, const Visit& visit) {
  visit(linear_slot(p + "w1.weight", Shape{inter, hidden}, e.gate));
  visit(linear_slot(p + "w3.weight", Shape{inter, hidden}, e.up));
  visit(linear_slot(p + "w2.weight", Shape{hidden, inter}, e.down));
}

}  // namespace

void visit_layer_norms_and_hc(const CommonConfig& c, const std::string& p, Tensor& attn_norm, Tensor& ffn_norm,
                              HyperConnectionWeights& attn_hc, HyperConnectionWeights& ffn_hc, const Visit& visit) {
  const int D = c.hidden_size, N = c.hc_mult;
  const int mix = (2 + N) * N;
  visit({p + "attn_norm.weight", Shape{D}, WeightRole::NormWeight, &attn_norm});
  visit({p + "ffn_norm.weight", Shape{D}, WeightRole::NormWeight, &ffn_norm});
  visit_hc(p, mix, int64_t{N} * D, attn_hc, 3, visit, "hc_attn_fn", "hc_attn_base", "hc_attn_scale");
  visit_hc(p, mix, int64_t{N} * D, ffn_hc, 3, visit, "hc_ffn_fn", "hc_ffn_base", "hc_ffn_scale");
}

void visit_attention_core(const CommonConfig& c, const std::string& p, AttentionCoreWeights& a, const Visit& visit) {
  const int D = c.hidden_size, H = c.num_heads, hd = c.head_dim;
  visit(linear_slot(p + "attn.wq_a.weight", Shape{c.q_lora_rank, D}, a.q_a_proj));
  visit({p + "attn.q_norm.weight", Shape{c.q_lora_rank}, WeightRole::NormWeight, &a.q_a_norm});
  visit(linear_slot(p + "attn.wq_b.weight", Shape{H * hd, c.q_lora_rank}, a.q_b_proj));
  visit(linear_slot(p + "attn.wkv.weight", Shape{hd, D}, a.kv_proj));
  visit({p + "attn.kv_norm.weight", Shape{hd}, WeightRole::NormWeight, &a.kv_norm});
  visit(linear_slot(p + "attn.wo_a.weight", Shape{c.o_groups * c.o_lora_rank, H * hd / c.o_groups}, a.o_a_proj));
  visit(linear_slot(p + "attn.wo_b.weight", Shape{D, c.o_groups * c.o_lora_rank}, a.o_b_proj));
  visit({p + "attn.attn_sink", Shape{H}, WeightRole::Sink, &a.sinks});
}

void visit_moe(const CommonConfig& c, const std::string& p, bool hash_routed, MoeWeights& m, const Visit& visit) {
  const int D = c.hidden_size;
  visit(linear_slot(p + "ffn.gate.weight", Shape{c.n_routed_experts, D}, m.router));
  if (!hash_routed)
    visit({p + "ffn.gate.bias", Shape{c.n_routed_experts}, WeightRole::SelectionBias, &m.selection_bias});
  m.experts.resize(c.n_routed_experts);
  for (int e = 0; e < c.n_routed_experts; ++e)
    visit_expert(fmt::format("{}ffn.experts.{}.", p, e), c.moe_intermediate_size, D, m.experts[e], visit);
  visit_expert(p + "ffn.shared_experts.", c.moe_intermediate_size, D, m.shared, visit);
}

}  // namespace weights_visit

namespace {

using namespace weights_visit;

void visit_compressor(const std::string& p, int ratio, int halves, int dim, int hidden, CompressorWeights& c,
                      const Visit& visit) {
  visit(linear_slot(p + "wkv.weight", Shape{halves * dim, hidden}, c.kv_proj));
  visit(linear_slot(p + "wgate.weight", Shape{halves * dim, hidden}, c.gate_proj));
  visit({p + "ape", Shape{ratio, halves * dim}, WeightRole::PositionBias, &c.position_bias});
  visit({p + "norm.weight", Shape{dim}, WeightRole::NormWeight, &c.norm});
}

// What a decoder layer is made of: main layer l, or the MTP block (sliding, scored MoE).
struct LayerKind {
  std::string prefix;  // "layers.3." or "mtp.0."
  AttentionKind attention;
  int compress_ratio;
  bool hash_routed;
};

void visit_layer(const ModelConfig& c, const LayerKind& k, LayerWeights& L, const Visit& visit) {
  const std::string& p = k.prefix;
  const int D = c.hidden_size, hd = c.head_dim;
  visit_layer_norms_and_hc(c, p, L.attn_norm, L.ffn_norm, L.attn_hc, L.ffn_hc, visit);
  auto& a = L.attn;
  visit_attention_core(c, p, a, visit);
  const auto kind = k.attention;
  if (kind != AttentionKind::Sliding) {
    const int halves = kind == AttentionKind::CompressedSparse ? 2 : 1;
    if (!a.compressor) a.compressor.emplace();
    visit_compressor(p + "attn.compressor.", k.compress_ratio, halves, hd, D, *a.compressor, visit);
  }
  if (kind == AttentionKind::CompressedSparse) {
    if (!a.indexer) a.indexer.emplace();
    auto& ix = *a.indexer;
    visit(linear_slot(p + "attn.indexer.wq_b.weight", Shape{c.index_n_heads * c.index_head_dim, c.q_lora_rank},
                      ix.q_b_proj));
    visit(linear_slot(p + "attn.indexer.weights_proj.weight", Shape{c.index_n_heads, D}, ix.weights_proj));
    visit_compressor(p + "attn.indexer.compressor.", k.compress_ratio, 2, c.index_head_dim, D, ix.compressor, visit);
  }

  visit_moe(c, p, k.hash_routed, L.moe, visit);
}

}  // namespace

void for_each_mtp_weight(const ModelConfig& c, MtpWeights& m, const Visit& visit) {
  const int D = c.hidden_size, N = c.hc_mult;
  visit(linear_slot("mtp.0.e_proj.weight", Shape{D, D}, m.e_proj));
  visit(linear_slot("mtp.0.h_proj.weight", Shape{D, D}, m.h_proj));
  visit({"mtp.0.enorm.weight", Shape{D}, WeightRole::NormWeight, &m.enorm});
  visit({"mtp.0.hnorm.weight", Shape{D}, WeightRole::NormWeight, &m.hnorm});
  visit({"mtp.0.norm.weight", Shape{D}, WeightRole::NormWeight, &m.norm});
  visit_hc("mtp.0.", N, int64_t{N} * D, m.hc_head, 1, visit, "hc_head_fn", "hc_head_base", "hc_head_scale");
  visit_layer(c, {"mtp.0.", AttentionKind::Sliding, 0, false}, m.block, visit);
}

void for_each_weight(const ModelConfig& c, ModelWeights& w, const Visit& visit) {
  const int D = c.hidden_size, N = c.hc_mult;
  visit({"embed.weight", Shape{c.vocab_size, D}, WeightRole::Embedding, &w.embed});
  w.layers.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l)
    visit_layer(c, {fmt::format("layers.{}.", l), c.attention[l], c.compress_ratio[l], c.hash_routed[l]}, w.layers[l],
                visit);
  visit_hc("", N, int64_t{N} * D, w.hc_head, 1, visit, "hc_head_fn", "hc_head_base", "hc_head_scale");
  visit({"norm.weight", Shape{D}, WeightRole::NormWeight, &w.norm});
  visit(linear_slot("head.weight", Shape{c.vocab_size, D}, w.head));
  if (w.mtp) for_each_mtp_weight(c, *w.mtp, visit);
}

}  // namespace frank::model
