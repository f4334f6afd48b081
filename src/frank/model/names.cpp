#include "frank/model/names.h"

#include <fmt/format.h>

#include <array>
#include <string_view>
#include <utility>

namespace frank::model {
namespace {

// Official suffix (after `layers.N.`) -> transformers module suffix (after `model.layers.N.`),
// the inverse of transformers' conversion_mapping for deepseek_v4.
constexpr std::array<std::pair<std::string_view, std::string_view>, 29> kLayerModuleNames{{
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"hc_attn_fn", "attn_hc.fn"},
    {"hc_attn_base", "attn_hc.base"},
    {"hc_attn_scale", "attn_hc.scale"},
    {"hc_ffn_fn", "ffn_hc.fn"},
    {"hc_ffn_base", "ffn_hc.base"},
    {"hc_ffn_scale", "ffn_hc.scale"},
    {"attn.wq_a.weight", "self_attn.q_a_proj.weight"},
    {"attn.q_norm.weight", "self_attn.q_a_norm.weight"},
    {"attn.wq_b.weight", "self_attn.q_b_proj.weight"},
    {"attn.wkv.weight", "self_attn.kv_proj.weight"},
    {"attn.kv_norm.weight", "self_attn.kv_norm.weight"},
    {"attn.wo_a.weight", "self_attn.o_a_proj.weight"},
    {"attn.wo_b.weight", "self_attn.o_b_proj.weight"},
    {"attn.attn_sink", "self_attn.sinks"},
    {"attn.compressor.wkv.weight", "self_attn.compressor.kv_proj.weight"},
    {"attn.compressor.wgate.weight", "self_attn.compressor.gate_proj.weight"},
    {"attn.compressor.ape", "self_attn.compressor.position_bias"},
    {"attn.compressor.norm.weight", "self_attn.compressor.kv_norm.weight"},
    {"attn.indexer.wq_b.weight", "self_attn.compressor.indexer.q_b_proj.weight"},
    {"attn.indexer.weights_proj.weight", "self_attn.compressor.indexer.scorer.weights_proj.weight"},
    {"attn.indexer.compressor.wkv.weight", "self_attn.compressor.indexer.kv_proj.weight"},
    {"attn.indexer.compressor.wgate.weight", "self_attn.compressor.indexer.gate_proj.weight"},
    {"attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"},
    {"attn.indexer.compressor.norm.weight", "self_attn.compressor.indexer.kv_norm.weight"},
    {"ffn.gate.weight", "mlp.gate.weight"},
    {"ffn.gate.bias", "mlp.gate.e_score_correction_bias"},
    {"ffn.gate.tid2eid", "mlp.gate.tid2eid"},
}};

constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kTopLevelModuleNames{{
    {"embed.weight", "model.embed_tokens.weight"},
    {"head.weight", "lm_head.weight"},
    {"norm.weight", "model.norm.weight"},
    {"hc_head_fn", "model.hc_head.hc_fn"},
    {"hc_head_base", "model.hc_head.hc_base"},
    {"hc_head_scale", "model.hc_head.hc_scale"},
}};

}  // namespace

std::string transformers_layer_suffix(std::string_view suffix) {
  for (auto [official, module] : kLayerModuleNames)
    if (suffix == official) return std::string(module);
  // Shared expert: ffn.shared_experts.w1/w3/w2 -> mlp.shared_experts.gate/up/down_proj.
  constexpr std::string_view shared = "ffn.shared_experts.";
  if (suffix.starts_with(shared)) {
    auto w = suffix.substr(shared.size());
    const char* proj = w == "w1.weight" ? "gate_proj" : w == "w3.weight" ? "up_proj" : "down_proj";
    return fmt::format("mlp.shared_experts.{}.weight", proj);
  }
  return {};
}

std::vector<std::string> base_name_candidates(
    const std::string& official, std::span<const std::pair<std::string_view, std::string_view>> top_level) {
  std::vector<std::string> out{official, "model." + official};
  for (auto [name, module] : top_level)
    if (official == name) out.emplace_back(module);
  return out;
}

std::optional<LayerName> split_layer_name(std::string_view official) {
  constexpr std::string_view layers = "layers.";
  if (!official.starts_with(layers)) return std::nullopt;
  const auto dot = official.find('.', layers.size());
  if (dot == std::string_view::npos) return std::nullopt;
  return LayerName{std::string(official.substr(layers.size(), dot - layers.size())), official.substr(dot + 1)};
}

std::vector<std::string> name_candidates(const std::string& official) {
  std::vector<std::string> out = base_name_candidates(official, kTopLevelModuleNames);
  const auto layer = split_layer_name(official);
  if (!layer) return out;
  const std::string prefix = "layers." + layer->index + ".";
  const std::string_view suffix = layer->suffix;
  // save_pretrained maps every `.kv_norm.` back to `.norm.`, so the attention kv_norm is saved
  // as `attn.norm.weight` (dsv4-reference-notes §4).
  if (suffix == "attn.kv_norm.weight") out.push_back("model." + prefix + "attn.norm.weight");
  if (auto module = transformers_layer_suffix(suffix); !module.empty()) out.push_back("model." + prefix + module);
  // Older transformers kept the indexer weights_proj outside `scorer`.
  if (suffix == "attn.indexer.weights_proj.weight")
    out.push_back("model." + prefix + "self_attn.compressor.indexer.weights_proj.weight");
  return out;
}

std::vector<std::string> stacked_gate_up_names(int layer) {
  return {fmt::format("model.layers.{}.mlp.experts.gate_up_proj", layer),
          fmt::format("model.layers.{}.ffn.experts.gate_up_proj", layer)};
}

std::vector<std::string> stacked_down_names(int layer) {
  return {fmt::format("model.layers.{}.mlp.experts.down_proj", layer),
          fmt::format("model.layers.{}.ffn.experts.down_proj", layer)};
}

bool is_mtp_tensor(const std::string& name) {
  return name.starts_with("mtp.") || name.starts_with("model.mtp.");
}

}  // namespace frank::model
