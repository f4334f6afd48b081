#pragma once
// Writes the synthetic tiny model as a checkpoint directory, in a chosen name spelling and dtype,
// so loader tests start from weights whose values they know.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frank/model/synthetic.h"
#include "safetensors_test_util.h"

namespace frank::test {

// config.json of the synthetic tiny model in DeepSeek's official spelling.
inline nlohmann::json tiny_official_config() {
  return {{"model_type", "deepseek_v4"},   {"vocab_size", 256},       {"hidden_size", 64},
          {"num_hidden_layers", 6},       {"num_attention_heads", 4}, {"num_key_value_heads", 1},
          {"head_dim", 32},               {"qk_rope_head_dim", 8},   {"q_lora_rank", 32},
          {"o_groups", 2},                {"o_lora_rank", 16},       {"n_routed_experts", 8},
          {"n_shared_experts", 1},        {"num_experts_per_tok", 2}, {"moe_intermediate_size", 32},
          {"sliding_window", 8},          {"index_n_heads", 16},     {"index_head_dim", 16},
          {"index_topk", 4},              {"hc_mult", 4},            {"hc_sinkhorn_iters", 20},
          {"hc_eps", 1e-6},               {"rms_norm_eps", 1e-6},    {"swiglu_limit", 10.0},
          {"routed_scaling_factor", 1.5}, {"scoring_func", "sqrtsoftplus"},
          {"num_hash_layers", 3},         {"compress_ratios", {0, 0, 4, 16, 4, 16, 0}},
          {"rope_theta", 10000.0},        {"compress_rope_theta", 160000.0},
          {"rope_scaling",
           {{"type", "yarn"}, {"factor", 16}, {"original_max_position_embeddings", 65536}, {"beta_fast", 32},
            {"beta_slow", 1}}},
          {"max_position_embeddings", 1048576}, {"num_nextn_predict_layers", 0}};
}

// One safetensors tensor per weight, named by `rename(official name)`, as F32 or BF16.
template <typename Rename>
std::vector<TensorSpec> weight_specs(const model::ModelConfig& c, model::ModelWeights& w, bool bf16, Rename rename) {
  std::vector<TensorSpec> specs;
  model::for_each_weight(c, w, [&](const model::WeightSlot& slot) {
    const auto& data = slot.dst->data;
    if (bf16) {
      std::vector<uint16_t> bits;
      for (float v : data) bits.push_back(f32_to_bf16_rne(v));
      specs.push_back({rename(slot.name), "BF16", slot.shape, to_bytes(bits)});
    } else {
      specs.push_back({rename(slot.name), "F32", slot.shape, to_bytes(data)});
    }
  });
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.hash_routed[l]) continue;
    const auto& t = w.layers[l].moe.tid2eid;
    std::vector<int64_t> wide(t.begin(), t.end());
    specs.push_back({rename(fmt::format("layers.{}.ffn.gate.tid2eid", l)), "I64",
                     {c.vocab_size, c.experts_per_token}, to_bytes(wide)});
  }
  return specs;
}

inline void write_checkpoint(const std::filesystem::path& dir, const nlohmann::json& config,
                             const std::vector<TensorSpec>& specs) {
  write_file(dir / "config.json", config.dump(2));
  write_file(dir / "model.safetensors", build_safetensors(specs));
}

}  // namespace frank::test
