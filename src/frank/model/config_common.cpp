#include "frank/model/config_common.h"

#include <fmt/format.h>

#include <fstream>

#include "frank/model/config_json.h"

namespace frank::model {
namespace {

using nlohmann::json;
using config_json::get_or;
using config_json::positive;

// One rotary spec from a transformers-style dict ({"rope_type": "yarn", "factor": ...}) or
// DeepSeek's official `rope_scaling` ({"type": "yarn", ...}).
RopeSpec parse_rope(const json& params, double theta, int64_t max_positions, const char* family) {
  RopeSpec spec;
  spec.theta = params.is_object() ? get_or<double>(params, "rope_theta", theta) : theta;
  if (!params.is_object()) return spec;
  std::string type = get_or<std::string>(params, "rope_type", get_or<std::string>(params, "type", "default"));
  if (type == "default") return spec;
  if (type != "yarn")
    throw Error(fmt::format("config.json: rope type '{}' is not supported ({} uses yarn)", type, family));
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
  // DeepSeek-V4 and V4.1 apply no YaRN mscale; transformers forces attention_factor = 1.0 for them.
  const double attention_factor = get_or<double>(params, "attention_factor", 1.0);
  if (attention_factor != 1.0)
    throw Error(fmt::format("config.json: yarn attention_factor {} is not supported ({} uses 1.0)", attention_factor,
                            family));
  if (get_or<double>(params, "mscale", 0.0) != 0.0 && get_or<double>(params, "mscale_all_dim", 0.0) != 0.0)
    throw Error(fmt::format("config.json: yarn mscale/mscale_all_dim are not supported for {}", family));
  return spec;
}

void parse_rope_tables(const json& j, CommonConfig& c, const char* family) {
  const double main_theta = get_or<double>(j, "rope_theta", 10000.0);
  const double compress_theta = get_or<double>(j, "compress_rope_theta", 160000.0);
  const json* params = nullptr;
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) params = &*it;
  if (params != nullptr && params->contains("main") && params->contains("compress")) {
    c.rope_main = parse_rope((*params)["main"], main_theta, c.max_position_embeddings, family);
    c.rope_compress = parse_rope((*params)["compress"], compress_theta, c.max_position_embeddings, family);
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
  c.rope_compress = parse_rope(compress, compress_theta, c.max_position_embeddings, family);
}

void validate(const CommonConfig& c) {
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

CommonConfig parse_common_config(const json& j, const CommonConfig& d, const char* family) {
  CommonConfig c;
  c.vocab_size = positive(j, "vocab_size", d.vocab_size);
  c.hidden_size = positive(j, "hidden_size", d.hidden_size);
  c.num_layers = positive(j, "num_hidden_layers", d.num_layers);
  c.num_heads = positive(j, "num_attention_heads", d.num_heads);
  if (get_or<int>(j, "num_key_value_heads", 1) != 1)
    throw Error(fmt::format("config.json: num_key_value_heads must be 1 ({} shares one K=V head)", family));
  c.head_dim = positive(j, "head_dim", d.head_dim);
  c.q_lora_rank = positive(j, "q_lora_rank", d.q_lora_rank);
  c.o_groups = positive(j, "o_groups", d.o_groups);
  c.o_lora_rank = positive(j, "o_lora_rank", d.o_lora_rank);
  c.n_routed_experts = positive(j, "n_routed_experts", d.n_routed_experts);
  c.experts_per_token = positive(j, "num_experts_per_tok", d.experts_per_token);
  c.moe_intermediate_size = positive(j, "moe_intermediate_size", d.moe_intermediate_size);
  c.sliding_window = positive(j, "sliding_window", d.sliding_window);
  c.index_n_heads = positive(j, "index_n_heads", d.index_n_heads);
  c.index_head_dim = positive(j, "index_head_dim", d.index_head_dim);
  c.index_topk = positive(j, "index_topk", d.index_topk);
  c.hc_mult = positive(j, "hc_mult", d.hc_mult);
  c.hc_sinkhorn_iters = positive(j, "hc_sinkhorn_iters", d.hc_sinkhorn_iters);
  c.hc_eps = get_or<float>(j, "hc_eps", d.hc_eps);
  c.rms_norm_eps = get_or<float>(j, "rms_norm_eps", d.rms_norm_eps);
  c.swiglu_limit = get_or<float>(j, "swiglu_limit", d.swiglu_limit);
  c.routed_scaling_factor = get_or<float>(j, "routed_scaling_factor", d.routed_scaling_factor);
  c.max_position_embeddings = get_or<int64_t>(j, "max_position_embeddings", d.max_position_embeddings);
  c.bos_token_id = get_or<int>(j, "bos_token_id", d.bos_token_id);
  if (auto it = j.find("eos_token_id"); it != j.end() && it->is_array() && !it->empty())
    c.eos_token_id = (*it)[0].get<int>();
  else
    c.eos_token_id = get_or<int>(j, "eos_token_id", d.eos_token_id);
  c.num_nextn_predict_layers = get_or<int>(j, "num_nextn_predict_layers", d.num_nextn_predict_layers);
  if (c.num_nextn_predict_layers < 0) throw Error("config.json: num_nextn_predict_layers must not be negative");
  if (get_or<int>(j, "n_shared_experts", 1) != 1)
    throw Error(fmt::format("config.json: n_shared_experts must be 1 ({} has exactly one shared expert)", family));
  const auto scoring = get_or<std::string>(j, "scoring_func", "sqrtsoftplus");
  if (scoring != "sqrtsoftplus")
    throw Error(fmt::format("config.json: scoring_func '{}' is not supported ({} uses sqrtsoftplus)", scoring, family));

  // Rotated dims: official qk_rope_head_dim, else transformers' partial_rotary_factor (default 64/512).
  if (j.contains("qk_rope_head_dim") && !j["qk_rope_head_dim"].is_null()) {
    c.rope_dim = get_or<int>(j, "qk_rope_head_dim", 64);
  } else {
    const double factor = get_or<double>(j, "partial_rotary_factor", 64.0 / 512.0);
    c.rope_dim = static_cast<int>(c.head_dim * factor);
  }
  parse_rope_tables(j, c, family);
  validate(c);
  return c;
}

json read_config_json(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "config.json";
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot open {}", path.string()));
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: invalid JSON: {}", path.string(), e.what()));
  }
}

}  // namespace frank::model
