#pragma once
// Tensor-name spellings. frank names every weight by its official DeepSeek checkpoint key
// (`layers.2.attn.wq_a.weight`); a checkpoint may instead use what transformers' save_pretrained
// writes (`model.layers.2.attn.wq_a.weight`, `model.layers.2.attn.norm.weight` for kv_norm) or
// transformers' module names (`model.layers.2.self_attn.q_a_proj.weight`).
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace frank::model {

// Every spelling of the tensor whose official name is `official`, official first.
std::vector<std::string> name_candidates(const std::string& official);

// What every model's spellings share (V4 here, V4.1 in names_v41): the official name, "model." +
// it, and for a top-level tensor its transformers module name (`top_level`: official -> module).
std::vector<std::string> base_name_candidates(
    const std::string& official, std::span<const std::pair<std::string_view, std::string_view>> top_level);

// A layer tensor's official name `layers.N.<suffix>` split into N and the suffix (a view into
// `official`); nullopt for a name outside the layers.
struct LayerName {
  std::string index;
  std::string_view suffix;
};
std::optional<LayerName> split_layer_name(std::string_view official);

// transformers' module-name suffix (after `model.layers.N.`) for an official layer suffix (after
// `layers.N.`), or "" when transformers' DeepSeek-V4 names it no other way.
std::string transformers_layer_suffix(std::string_view official_suffix);

// transformers stacks routed experts per layer; these are its two tensor names for layer `l`,
// [experts, 2*I, hidden] (rows [0, I) = w1 gate, [I, 2I) = w3 up) and [experts, hidden, I].
std::vector<std::string> stacked_gate_up_names(int layer);
std::vector<std::string> stacked_down_names(int layer);

// Multi-token-prediction tensors (mtp.*, either spelling). V4's loader takes its MTP block from them
// when the checkpoint has it, V4.1's its DSpark drafter when the config declares one; neither reports
// them as unused.
bool is_mtp_tensor(const std::string& name);

}  // namespace frank::model
