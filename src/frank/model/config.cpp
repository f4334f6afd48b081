#include "frank/model/config.h"

#include <fmt/format.h>

#include "frank/model/config_json.h"

namespace frank::model {
namespace {

using nlohmann::json;

using config_json::get_or;

// transformers' DeepseekV4Config defaults (the V4-Flash values), so a config that omits a key means
// what it means to the reference implementation.
CommonConfig v4_flash_defaults() {
  CommonConfig d;
  d.vocab_size = 129280;
  d.hidden_size = 4096;
  d.num_layers = 43;
  d.num_heads = 64;
  d.head_dim = 512;
  d.q_lora_rank = 1024;
  d.o_groups = 8;
  d.o_lora_rank = 1024;
  d.n_routed_experts = 256;
  d.experts_per_token = 6;
  d.moe_intermediate_size = 2048;
  d.sliding_window = 128;
  d.index_n_heads = 64;
  d.index_head_dim = 128;
  d.index_topk = 512;
  d.hc_mult = 4;
  d.hc_sinkhorn_iters = 20;
  d.hc_eps = 1e-6f;
  d.rms_norm_eps = 1e-6f;
  d.swiglu_limit = 10.0f;
  d.routed_scaling_factor = 1.5f;
  d.max_position_embeddings = 1048576;
  d.bos_token_id = 0;
  d.eos_token_id = 1;
  d.num_nextn_predict_layers = 1;
  return d;
}

AttentionKind kind_from_name(const std::string& name) {
  if (name == "sliding_attention") return AttentionKind::Sliding;
  if (name == "compressed_sparse_attention") return AttentionKind::CompressedSparse;
  if (name == "heavily_compressed_attention") return AttentionKind::HeavilyCompressed;
  throw Error(fmt::format("config.json: unknown layer type '{}' in layer_types", name));
}

void parse_layer_schedule(const json& j, ModelConfig& c) {
  const int n = c.num_layers;
  int csa_rate = 4, hca_rate = 128;
  if (auto it = j.find("compress_rates"); it != j.end() && it->is_object()) {
    csa_rate = get_or<int>(*it, "compressed_sparse_attention", csa_rate);
    hca_rate = get_or<int>(*it, "heavily_compressed_attention", hca_rate);
  }
  csa_rate = get_or<int>(j, "compress_rate_csa", csa_rate);
  hca_rate = get_or<int>(j, "compress_rate_hca", hca_rate);
  if (csa_rate <= 0 || hca_rate <= 0) throw Error("config.json: compress rates must be positive");

  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || static_cast<int>(it->size()) < n)
      throw Error(fmt::format("config.json: layer_types must list at least num_hidden_layers ({}) entries", n));
    for (int l = 0; l < n; ++l) {
      if (!(*it)[l].is_string()) throw Error("config.json: layer_types entries must be strings");
      c.attention.push_back(kind_from_name((*it)[l].get<std::string>()));
    }
    for (auto kind : c.attention)
      c.compress_ratio.push_back(kind == AttentionKind::Sliding            ? 0
                                 : kind == AttentionKind::CompressedSparse ? csa_rate
                                                                           : hca_rate);
  } else if (auto it = j.find("compress_ratios"); it != j.end() && !it->is_null()) {
    // Official spelling: one ratio per layer (+ trailing MTP entries). DeepSeek's inference code
    // uses the overlapping CSA scheme with an indexer exactly when the ratio is 4.
    if (!it->is_array() || static_cast<int>(it->size()) < n)
      throw Error(fmt::format("config.json: compress_ratios must list at least num_hidden_layers ({}) entries", n));
    for (int l = 0; l < n; ++l) {
      if (!(*it)[l].is_number_integer()) throw Error("config.json: compress_ratios entries must be integers");
      const int r = (*it)[l].get<int>();
      if (r < 0) throw Error(fmt::format("config.json: compress_ratios[{}] = {} is negative", l, r));
      c.compress_ratio.push_back(r);
      c.attention.push_back(r == 0   ? AttentionKind::Sliding
                            : r == 4 ? AttentionKind::CompressedSparse
                                     : AttentionKind::HeavilyCompressed);
    }
  } else {
    // transformers' default schedule: two HCA layers, then CSA/HCA interleaved.
    for (int l = 0; l < n; ++l) {
      const bool csa = l >= 2 && (l - 2) % 2 == 1;
      c.attention.push_back(csa ? AttentionKind::CompressedSparse : AttentionKind::HeavilyCompressed);
      c.compress_ratio.push_back(csa ? csa_rate : hca_rate);
    }
  }

  if (auto it = j.find("mlp_layer_types"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || static_cast<int>(it->size()) < n)
      throw Error(fmt::format("config.json: mlp_layer_types must list at least num_hidden_layers ({}) entries", n));
    for (int l = 0; l < n; ++l) {
      const auto name = (*it)[l].is_string() ? (*it)[l].get<std::string>() : std::string("?");
      if (name != "hash_moe" && name != "moe")
        throw Error(fmt::format("config.json: unknown mlp layer type '{}' in mlp_layer_types", name));
      c.hash_routed.push_back(name == "hash_moe");
    }
  } else {
    const int n_hash = get_or<int>(j, "num_hash_layers", 3);
    if (n_hash < 0) throw Error("config.json: num_hash_layers must not be negative");
    for (int l = 0; l < n; ++l) c.hash_routed.push_back(l < n_hash);
  }
}

}  // namespace

const char* attention_kind_name(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::Sliding: return "sliding";
    case AttentionKind::CompressedSparse: return "csa";
    case AttentionKind::HeavilyCompressed: return "hca";
  }
  return "?";
}

int ModelConfig::num_hash_layers() const {
  int n = 0;
  for (bool h : hash_routed) n += h;
  return n;
}

ModelConfig parse_config(const json& j) {
  if (!j.is_object()) throw Error("config.json: top level must be a JSON object");
  const auto type = get_or<std::string>(j, "model_type", "");
  if (type == "deepseek_v41")
    throw Error("config.json: model_type 'deepseek_v41' (DeepSeek-V4.1) is not a DeepSeek-V4 model; V4.1 runs on the "
                "CPU reference through `frank logits` and `frank generate` only (config_v41.h, engine/v41_model.h)");
  if (type != "deepseek_v4")
    throw Error(fmt::format("config.json: unknown model_type '{}' (frank supports deepseek_v4)", type));

  ModelConfig c;
  static_cast<CommonConfig&>(c) = parse_common_config(j, v4_flash_defaults(), "DeepSeek-V4");
  c.model_type = type;
  parse_layer_schedule(j, c);
  return c;
}

ModelConfig load_config(const std::filesystem::path& model_dir) { return parse_config(read_config_json(model_dir)); }

}  // namespace frank::model
