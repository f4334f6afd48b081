#pragma once
// V41Config: the DeepSeek-V4.1 text model's hyper-parameters (dsv41-model.md §1-§2), parsed from the
// composite `deepseek_v41` config.json (text parameters under `text_config`) or a flat
// `deepseek_v41_text` one. Images are not supported: a `vision_config` is noted and skipped.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "frank/model/config_common.h"

namespace frank::model {

// The n-gram hash memory on a few layers (dsv41-model.md §6).
struct EngramConfig {
  std::vector<int> layer_ids;          // layers that add an Engram lookup before their attention
  std::vector<int64_t> table_rows;     // per Engram layer: rows of its table (= sum of its primes)
  int hash_vocab_size = 0;             // engram_vocab_size: the primes are drawn above hash_vocab_size - 1
  int max_ngram_size = 0;              // n-grams of 2..max_ngram_size tokens
  int n_heads = 0;                     // hash heads per n-gram size
  int head_dim = 0;                    // width of one table row
  int pad_token_id = 0;                // token id whose compressed class fills blocked look-back slots
  int compressed_vocab_size = 0;       // classes of the normalised-token map

  int hash_columns() const { return (max_ngram_size - 1) * n_heads; }  // table rows gathered per token
  // Index of `layer` in layer_ids, or -1 when the layer has no Engram.
  int index_of(int layer) const;
};

// The DSpark drafter's settings (dsv41-model.md §8; the release's dspark_* text_config keys). Its
// context window is sliding_window; each stage is a sliding-only V4.1 block with its own MoE size.
struct DSparkConfig {
  int n_stages = 0;                 // num_nextn_predict_layers: mtp.0 .. mtp.{n_stages-1}
  int block_size = 0;               // drafted rows per anchor: the next token + block_size-1 noise rows
  int noise_token_id = 0;           // the id the block's noise rows embed
  std::vector<int> target_layers;   // main layers whose input features the drafter reads, in order
  int markov_rank = 0;              // width of the Markov head's token embedding
  int n_routed_experts = 0;         // of each stage's MoE
  int experts_per_token = 0;
};

struct V41Config : CommonConfig {
  std::string model_type = "deepseek_v41";
  float gate_temp = 1.0f;  // router logits are divided by it before sqrt-softplus

  // Per layer: 0 = sliding only, 1 or 2 = tokens pooled per compressed entry (CSA2).
  std::vector<int> compress_ratio;
  std::vector<int> kv_source_layers;     // own a compressor; publish entries and indexer keys
  std::vector<int> index_source_layers;  // own an indexer query; publish a top-k selection
  int candidate_source_layer = -1;       // -1: no two-level top-k
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;

  EngramConfig engram;

  int image_token_id = -1;       // from the composite config; images are not supported
  bool has_vision_config = false;
  std::vector<std::string> notes;  // what was read but is not used, for the user (vision)
  std::optional<DSparkConfig> dspark;  // set when num_nextn_predict_layers > 0

  // A DSpark stage as a one-layer V4.1 config: this config with the stage MoE's expert count and top-k.
  V41Config dspark_stage() const;

  bool is_kv_source(int layer) const;
  bool is_index_source(int layer) const;
  // The KV source whose compressed entries `layer` attends: the closest one at or below it; -1 for a
  // sliding-only layer.
  int kv_source_of(int layer) const;
};

// Parses and validates; throws frank::Error naming the field that is missing or inconsistent.
V41Config parse_v41_config(const nlohmann::json& j);
V41Config load_v41_config(const std::filesystem::path& model_dir);

}  // namespace frank::model
