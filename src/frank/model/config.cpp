#include "frank/model/config.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "frank/core/error.h"

namespace frank::model {
namespace {

using nlohmann::json;

// Defaults are transformers' DeepseekV4Config defaults (the V4-Flash values), so a config that
// omits a key means what it means to the reference implementation.
template <typename T>
T get_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw Error(fmt::format("config.json: field '{}' has the wrong type ({})", key, it->dump()));
  }
}

int positive(const json& j, const char* key, int fallback) {
  const int v = get_or<int>(j, key, fallback);
  if (v <= 0) throw Error(fmt::format("config.json: field '{}' must be positive, got {}", key, v));
  return v;
}

// One rotary spec from a transformers-style dict ({"rope_type": "yarn", "factor": ...}) or
// DeepSeek's official `rope_scaling` ({"type": "yarn", ...}).
RopeSpec parse_rope(const json& params, double theta, int64_t max_positions) {
  RopeSpec spec;
  spec.theta = params.is_object() ? get_or<double>(params, "rope_theta", theta) : theta;
  if (!params.is_object()) return spec;
  std::string type = get_or<std::string>(params, "rope_type", get_or<std::string>(params, "type", "default"));
  if (type == "default") return spec;
  if (type != "yarn") throw Error(fmt::format("config.json: rope type '{}' is not supported (DeepSeek-V4 uses yarn)", type));
  spec.yarn = true;
  spec.original_max_position_embeddings = get_or<int64_t>(params, "original_max_position_embeddings", 0);
  if (spec.original_max_position_embeddings <= 0)
    throw Error("config.json: yarn rope needs a positive original_max_position_embeddings");
  // transformers: factor defaults to max_position_embeddings / original_max_position_embeddings.
  spec.factor = get_or<double>(params, "factor",
                               static_cast<double>(max_positions) / spec.original_max_position_embeddings);
  // transformers reads `beta_fast or 32`, so an explicit 0 also means the default.
  const double beta_fast = get_or<double>(params, "beta_fast", 0.0);
  const double beta_slow = get_or<double>(params, "beta_slow", 0.0);
  spec.beta_fast = beta_fast != 0.0 ? beta_fast : 32.0;
  spec.beta_slow = beta_slow != 0.0 ? beta_slow : 1.0;
  // DeepSeek-V4 applies no YaRN mscale; transformers forces attention_factor = 1.0 for it.
  const double attention_factor = get_or<double>(params, "attention_factor", 1.0);
  if (attention_factor != 1.0)
    throw Error(fmt::format("config.json: yarn attention_factor {} is not supported (DeepSeek-V4 uses 1.0)",
                            attention_factor));
  if (get_or<double>(params, "mscale", 0.0) != 0.0 && get_or<double>(params, "mscale_all_dim", 0.0) != 0.0)
    throw Error("config.json: yarn mscale/mscale_all_dim are not supported for DeepSeek-V4");
  return spec;
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

void parse_rope_tables(const json& j, ModelConfig& c) {
  const double main_theta = get_or<double>(j, "rope_theta", 10000.0);
  const double compress_theta = get_or<double>(j, "compress_rope_theta", 160000.0);
  const json* params = nullptr;
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) params = &*it;
  if (params != nullptr && params->contains("main") && params->contains("compress")) {
    c.rope_main = parse_rope((*params)["main"], main_theta, c.max_position_embeddings);
    c.rope_compress = parse_rope((*params)["compress"], compress_theta, c.max_position_embeddings);
    if (params->contains("truncate") && !(*params)["truncate"].get<bool>())
      throw Error("config.json: yarn with truncate=false is not supported");
    return;
  }
  // Flat spelling (transformers before folding, or DeepSeek's rope_scaling): the scaling applies
  // to the compressed layers only; sliding layers use plain RoPE at rope_theta.
  const json* scaling = params;
  if (scaling == nullptr)
    if (auto it = j.find("rope_scaling"); it != j.end() && it->is_object()) scaling = &*it;
  c.rope_main = RopeSpec{main_theta};
  json compress = scaling != nullptr ? *scaling : json::object();
  compress["rope_theta"] = compress_theta;
  c.rope_compress = parse_rope(compress, compress_theta, c.max_position_embeddings);
}

void validate(const ModelConfig& c) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw Error("config.json: " + what);
  };
  require(c.head_dim % 2 == 0, "head_dim must be even");
  require(c.rope_dim > 0 && c.rope_dim % 2 == 0 && c.rope_dim <= c.head_dim,
          fmt::format("rope dims ({}) must be even and at most head_dim ({})", c.rope_dim, c.head_dim));
  require(c.rope_dim <= c.index_head_dim,
          fmt::format("rope dims ({}) must not exceed index_head_dim ({})", c.rope_dim, c.index_head_dim));
  require((c.num_heads * c.head_dim) % c.o_groups == 0 && c.num_heads % c.o_groups == 0,
          fmt::format("num_attention_heads ({}) must be divisible by o_groups ({})", c.num_heads, c.o_groups));
  require(c.experts_per_token <= c.n_routed_experts,
          fmt::format("num_experts_per_tok ({}) exceeds n_routed_experts ({})", c.experts_per_token,
                      c.n_routed_experts));
  require(c.hc_sinkhorn_iters >= 1, "hc_sinkhorn_iters must be at least 1");
  require(c.bos_token_id >= 0 && c.bos_token_id < c.vocab_size, "bos_token_id is outside the vocabulary");
  require(c.eos_token_id >= 0 && c.eos_token_id < c.vocab_size, "eos_token_id is outside the vocabulary");
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
    throw Error("config.json: model_type 'deepseek_v41' (DeepSeek-V4.1) is not supported yet; only deepseek_v4");
  if (type != "deepseek_v4")
    throw Error(fmt::format("config.json: unknown model_type '{}' (frank supports deepseek_v4)", type));

  ModelConfig c;
  c.model_type = type;
  c.vocab_size = positive(j, "vocab_size", 129280);
  c.hidden_size = positive(j, "hidden_size", 4096);
  c.num_layers = positive(j, "num_hidden_layers", 43);
  c.num_heads = positive(j, "num_attention_heads", 64);
  if (get_or<int>(j, "num_key_value_heads", 1) != 1)
    throw Error("config.json: num_key_value_heads must be 1 (DeepSeek-V4 shares one K=V head)");
  c.head_dim = positive(j, "head_dim", 512);
  c.q_lora_rank = positive(j, "q_lora_rank", 1024);
  c.o_groups = positive(j, "o_groups", 8);
  c.o_lora_rank = positive(j, "o_lora_rank", 1024);
  c.n_routed_experts = positive(j, "n_routed_experts", 256);
  c.experts_per_token = positive(j, "num_experts_per_tok", 6);
  c.moe_intermediate_size = positive(j, "moe_intermediate_size", 2048);
  c.sliding_window = positive(j, "sliding_window", 128);
  c.index_n_heads = positive(j, "index_n_heads", 64);
  c.index_head_dim = positive(j, "index_head_dim", 128);
  c.index_topk = positive(j, "index_topk", 512);
  c.hc_mult = positive(j, "hc_mult", 4);
  c.hc_sinkhorn_iters = positive(j, "hc_sinkhorn_iters", 20);
  c.hc_eps = get_or<float>(j, "hc_eps", 1e-6f);
  c.rms_norm_eps = get_or<float>(j, "rms_norm_eps", 1e-6f);
  c.swiglu_limit = get_or<float>(j, "swiglu_limit", 10.0f);
  c.routed_scaling_factor = get_or<float>(j, "routed_scaling_factor", 1.5f);
  c.max_position_embeddings = get_or<int64_t>(j, "max_position_embeddings", 1048576);
  c.bos_token_id = get_or<int>(j, "bos_token_id", 0);
  if (auto it = j.find("eos_token_id"); it != j.end() && it->is_array() && !it->empty())
    c.eos_token_id = (*it)[0].get<int>();
  else
    c.eos_token_id = get_or<int>(j, "eos_token_id", 1);
  c.num_nextn_predict_layers = get_or<int>(j, "num_nextn_predict_layers", 1);
  if (get_or<int>(j, "n_shared_experts", 1) != 1)
    throw Error("config.json: n_shared_experts must be 1 (DeepSeek-V4 has exactly one shared expert)");
  const auto scoring = get_or<std::string>(j, "scoring_func", "sqrtsoftplus");
  if (scoring != "sqrtsoftplus")
    throw Error(fmt::format("config.json: scoring_func '{}' is not supported (DeepSeek-V4 uses sqrtsoftplus)", scoring));

  // Rotated dims: official qk_rope_head_dim, else transformers' partial_rotary_factor (default 64/512).
  if (j.contains("qk_rope_head_dim") && !j["qk_rope_head_dim"].is_null()) {
    c.rope_dim = get_or<int>(j, "qk_rope_head_dim", 64);
  } else {
    const double factor = get_or<double>(j, "partial_rotary_factor", 64.0 / 512.0);
    c.rope_dim = static_cast<int>(c.head_dim * factor);
  }

  parse_layer_schedule(j, c);
  parse_rope_tables(j, c);
  validate(c);
  return c;
}

ModelConfig load_config(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "config.json";
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot open {}", path.string()));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: invalid JSON: {}", path.string(), e.what()));
  }
  return parse_config(j);
}

}  // namespace frank::model
