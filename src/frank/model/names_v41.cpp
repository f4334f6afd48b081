#include "frank/model/names_v41.h"

#include <array>
#include <regex>
#include <string_view>
#include <utility>

#include "frank/model/names.h"

namespace frank::model {
namespace {

// Released suffix (after `layers.N.`) -> transformers module suffix where V4.1 differs from V4: the
// indexer sits beside the compressor, its keys come from wk/k_norm, and the router has an image bias.
constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kV41LayerModuleNames{{
    {"attn.indexer.wq_b.weight", "self_attn.indexer.q_b_proj.weight"},
    {"attn.indexer.weights_proj.weight", "self_attn.indexer.weights_proj.weight"},
    {"attn.indexer.wk.weight", "self_attn.indexer.k_proj.weight"},
    {"attn.indexer.k_norm.weight", "self_attn.indexer.k_norm.weight"},
    {"ffn.gate.bias_vl", "mlp.gate.e_score_correction_bias_vl"},
}};

constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kTopLevelModuleNames{{
    {"embed.weight", "model.embed_tokens.weight"},
    {"head.weight", "lm_head.weight"},
    {"norm.weight", "model.norm.weight"},
}};

std::string v41_layer_suffix(std::string_view suffix) {
  for (auto [released, module] : kV41LayerModuleNames)
    if (suffix == released) return std::string(module);
  return transformers_layer_suffix(suffix);  // what V4 and V4.1 name alike
}

}  // namespace

std::vector<std::string> v41_name_candidates(const std::string& official) {
  std::vector<std::string> out = base_name_candidates(official, kTopLevelModuleNames);
  const auto layer = split_layer_name(official);
  if (!layer) return out;
  const std::string& index = layer->index;
  const std::string_view suffix = layer->suffix;
  // transformers keeps the (huge) Engram tables at model level, out of the decoder layers.
  if (suffix == "engram.embed.weight") out.push_back("model.engram_tables." + index + ".weight");
  if (auto module = v41_layer_suffix(suffix); !module.empty())
    out.push_back("model.layers." + index + "." + module);
  return out;
}

bool is_v41_vision_tensor(const std::string& name) {
  static const std::regex vision(R"((model\.)?((vision|visual|aligner)\..*|image_(start|end|newline)))");
  return std::regex_match(name, vision);
}

}  // namespace frank::model
