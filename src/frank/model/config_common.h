#pragma once
// The hyper-parameters DeepSeek-V4 and DeepSeek-V4.1 share (dims, MoE, mHC, RoPE), parsed once for
// both families (config.h: V4, config_v41.h: V4.1).
#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace frank::model {

// One rotary table: plain RoPE, or YaRN with attention_factor forced to 1 (V4 and V4.1 use no mscale).
struct RopeSpec {
  double theta = 10000.0;
  bool yarn = false;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

struct CommonConfig {
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int head_dim = 0;
  int rope_dim = 0;  // trailing dims of each head that are rotated (qk_rope_head_dim)
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;
  int n_routed_experts = 0;
  int experts_per_token = 0;
  int moe_intermediate_size = 0;
  int sliding_window = 0;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int hc_mult = 0;
  int hc_sinkhorn_iters = 0;
  float hc_eps = 1e-6f;
  float rms_norm_eps = 1e-6f;
  float swiglu_limit = 10.0f;
  float routed_scaling_factor = 1.0f;
  int64_t max_position_embeddings = 0;
  int bos_token_id = 0;
  int eos_token_id = 1;
  int num_nextn_predict_layers = 0;
  RopeSpec rope_main;      // sliding-only layers
  RopeSpec rope_compress;  // layers with a compressed branch (window part, compressor, indexer)

  int nope_dim() const { return head_dim - rope_dim; }
};

// Reads every CommonConfig field from `j` (a V4 config, or a V4.1 `text_config`); a missing key takes
// its value from `defaults` (the family's released model, as transformers defaults it). `family`
// names the model in error messages. Validates what the fields must satisfy among themselves.
CommonConfig parse_common_config(const nlohmann::json& j, const CommonConfig& defaults, const char* family);

// <model_dir>/config.json as JSON; throws frank::Error when it is missing or not JSON.
nlohmann::json read_config_json(const std::filesystem::path& model_dir);

}  // namespace frank::model
