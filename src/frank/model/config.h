#pragma once
// ModelConfig: the DeepSeek-V4 hyper-parameters the forward pass needs, parsed from a
// checkpoint's config.json in either spelling (DeepSeek's official keys or transformers').
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace frank::model {

// The three attention kinds of DeepSeek-V4 (dsv4-model.md §5).
enum class AttentionKind { Sliding, CompressedSparse, HeavilyCompressed };
const char* attention_kind_name(AttentionKind kind);

// One rotary table: plain RoPE, or YaRN with attention_factor forced to 1 (V4 uses no mscale).
struct RopeSpec {
  double theta = 10000.0;
  bool yarn = false;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

struct ModelConfig {
  std::string model_type = "deepseek_v4";
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
  RopeSpec rope_compress;  // CSA / HCA layers (window part, compressor, indexer)

  // Per layer.
  std::vector<AttentionKind> attention;
  std::vector<int> compress_ratio;  // 0 for sliding layers
  std::vector<bool> hash_routed;    // expert choice from tid2eid[token] instead of the router

  int nope_dim() const { return head_dim - rope_dim; }
  int num_hash_layers() const;
};

// Parses and validates; throws frank::Error naming the field that is missing or inconsistent.
ModelConfig parse_config(const nlohmann::json& j);
ModelConfig load_config(const std::filesystem::path& model_dir);

}  // namespace frank::model
