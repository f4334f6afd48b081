#pragma once
// Tensor-name spellings. frank names every weight by its official DeepSeek checkpoint key
// (`layers.2.attn.wq_a.weight`); a checkpoint may instead use what transformers' save_pretrained
// writes (`model.layers.2.attn.wq_a.weight`, `model.layers.2.attn.norm.weight` for kv_norm) or
// transformers' module names (`model.layers.2.self_attn.q_a_proj.weight`).
#include <string>
#include <string_view>
#include <vector>

namespace frank::model {

// Every spelling of the tensor whose official name is `official`, official first.
std::vector<std::string> name_candidates(const std::string& official);

// transformers' module-name suffix (after `model.layers.N.`) for an official layer suffix (after
// `layers.N.`), or "" when transformers' DeepSeek-V4 names it no other way.
std::string transformers_layer_suffix(std::string_view official_suffix);

// transformers stacks routed experts per layer; these are its two tensor names for layer `l`,
// [experts, 2*I, hidden] (rows [0, I) = w1 gate, [I, 2I) = w3 up) and [experts, hidden, I].
std::vector<std::string> stacked_gate_up_names(int layer);
std::vector<std::string> stacked_down_names(int layer);

// Names a loader may see but frank does not use yet (the MTP block, mtp.*); they are not reported
// as unused.
bool is_known_unused(const std::string& name);

}  // namespace frank::model
