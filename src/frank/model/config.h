#pragma once
// ModelConfig: the DeepSeek-V4 hyper-parameters the forward pass needs, parsed from a
// checkpoint's config.json in either spelling (DeepSeek's official keys or transformers').
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "frank/model/config_common.h"

namespace frank::model {

// The three attention kinds of DeepSeek-V4 (dsv4-model.md §5).
enum class AttentionKind { Sliding, CompressedSparse, HeavilyCompressed };
const char* attention_kind_name(AttentionKind kind);

struct ModelConfig : CommonConfig {
  std::string model_type = "deepseek_v4";

  // Per layer.
  std::vector<AttentionKind> attention;
  std::vector<int> compress_ratio;  // 0 for sliding layers
  std::vector<bool> hash_routed;    // expert choice from tid2eid[token] instead of the router

  int num_hash_layers() const;
};

// Parses and validates; throws frank::Error naming the field that is missing or inconsistent.
ModelConfig parse_config(const nlohmann::json& j);
ModelConfig load_config(const std::filesystem::path& model_dir);

}  // namespace frank::model
