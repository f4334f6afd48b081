#include "frank/model/config_v41.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "frank/model/config_json.h"

namespace frank::model {
namespace {

using nlohmann::json;
using config_json::get_or;
using config_json::positive;

// transformers' DeepseekV41TextConfig defaults (the released V4.1-Flash values), so a key the
// config omits means what it means to the reference implementation.
CommonConfig v41_flash_defaults() {
  CommonConfig d;
  d.vocab_size = 129280;
  d.hidden_size = 5120;
  d.num_layers = 40;
  d.num_heads = 64;
  d.head_dim = 512;
  d.q_lora_rank = 1280;
  d.o_groups = 8;
  d.o_lora_rank = 1024;
  d.n_routed_experts = 384;
  d.experts_per_token = 6;
  d.moe_intermediate_size = 2304;
  d.sliding_window = 128;
  d.index_n_heads = 32;
  d.index_head_dim = 128;
  d.index_topk = 512;
  d.hc_mult = 4;
  d.hc_sinkhorn_iters = 20;
  d.hc_eps = 1e-6f;
  d.rms_norm_eps = 1e-20f;
  d.swiglu_limit = 10.0f;
  d.routed_scaling_factor = 1.5f;
  d.max_position_embeddings = 1048576;
  d.bos_token_id = 0;
  d.eos_token_id = 1;
  d.num_nextn_predict_layers = 3;
  return d;
}

std::vector<int> int_list(const json& j, const char* key) {
  const auto& v = j.at(key);
  if (!v.is_array()) throw Error(fmt::format("config.json: field '{}' must be a list of integers", key));
  std::vector<int> out;
  for (const auto& e : v) {
    if (!e.is_number_integer())
      throw Error(fmt::format("config.json: field '{}' must be a list of integers, got {}", key, v.dump()));
    out.push_back(e.get<int>());
  }
  return out;
}

bool has(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// The attention schedule, with transformers' defaults and checks (DeepseekV41TextConfig.__post_init__).
void parse_schedule(const json& j, V41Config& c) {
  const int n = c.num_layers, n_nextn = c.num_nextn_predict_layers;
  const std::vector<int> released_ratios = [] {
    std::vector<int> r{0, 0};
    r.insert(r.end(), 18, 2);
    r.insert(r.end(), 20, 1);
    return r;
  }();
  const std::vector<int> released_kv{2, 8, 14, 20}, released_index{2, 8, 14, 20, 24, 28, 32, 36};

  std::vector<int> ratios;
  if (has(j, "compress_ratios")) {
    ratios = int_list(j, "compress_ratios");
  } else if (n == static_cast<int>(released_ratios.size())) {
    ratios = released_ratios;
  } else {  // the released pattern scaled to n layers: 2 sliding, a ratio-2 block, a ratio-1 block
    const int n_slide = std::min(2, n), n_enc = std::max(0, (n - n_slide + 1) / 2);
    ratios.assign(n_slide, 0);
    ratios.insert(ratios.end(), n_enc, 2);
    ratios.insert(ratios.end(), std::max(0, n - n_slide - n_enc), 1);
  }
  // The release lists 40 backbone + 3 DSpark entries; the DSpark layers are sliding only.
  if (static_cast<int>(ratios.size()) < n || static_cast<int>(ratios.size()) > n + n_nextn)
    throw Error(fmt::format("config.json: compress_ratios has {} entries; it needs num_hidden_layers ({}) up to "
                            "num_hidden_layers + num_nextn_predict_layers ({})",
                            ratios.size(), n, n + n_nextn));
  ratios.resize(n);
  for (int l = 0; l < n; ++l)
    if (ratios[l] < 0 || ratios[l] > 2)
      throw Error(fmt::format("config.json: compress_ratios[{}] = {}; DeepSeek-V4.1 uses 0, 1 or 2", l, ratios[l]));
  c.compress_ratio = ratios;

  if (has(j, "kv_source_layer_ids")) {
    c.kv_source_layers = int_list(j, "kv_source_layer_ids");
  } else if (std::equal(ratios.begin(), ratios.end(), released_ratios.begin(),
                        released_ratios.begin() + std::min<size_t>(n, released_ratios.size())) &&
             n <= static_cast<int>(released_ratios.size())) {
    c.kv_source_layers = released_kv;
  } else {  // the first layer of each same-ratio run publishes for its group
    for (int l = 0; l < n; ++l)
      if (ratios[l] > 0 && (l == 0 || ratios[l - 1] != ratios[l])) c.kv_source_layers.push_back(l);
  }
  if (has(j, "index_source_layer_ids"))
    c.index_source_layers = int_list(j, "index_source_layer_ids");
  else
    c.index_source_layers = c.kv_source_layers == released_kv ? released_index : c.kv_source_layers;

  for (int s : c.kv_source_layers)
    if (s < 0 || s >= n || ratios[s] == 0)
      throw Error(fmt::format(
          "config.json: kv_source_layer_ids {} must name layers in [0, {}) with compress_ratios > 0",
          c.kv_source_layers, n));
  for (int l = 0; l < n; ++l)
    if (ratios[l] > 0 && c.kv_source_of(l) < 0)
      throw Error(fmt::format("config.json: layer {} has compress_ratios {} but no kv_source_layer_ids entry at or "
                              "before it",
                              l, ratios[l]));
  // Each index source then also has a KV source at or before it to score against.
  for (int s : c.index_source_layers)
    if (s < 0 || s >= n || ratios[s] == 0)
      throw Error(fmt::format(
          "config.json: index_source_layer_ids {} must name layers in [0, {}) with compress_ratios > 0",
          c.index_source_layers, n));

  // null (or a negative id) disables the two-level top-k; the default is the last KV source.
  c.candidate_source_layer =
      get_or<int>(j, "candidate_source_layer_id", c.kv_source_layers.empty() ? -1 : c.kv_source_layers.back());
  if (c.candidate_source_layer < 0) c.candidate_source_layer = -1;
  if (c.candidate_source_layer >= 0 && !contains(c.index_source_layers, c.candidate_source_layer))
    throw Error(fmt::format("config.json: candidate_source_layer_id ({}) must be one of index_source_layer_ids {}",
                            c.candidate_source_layer, c.index_source_layers));
  c.candidate_topk_blocks = positive(j, "candidate_topk_blocks", 2048);
  c.candidate_block_size = positive(j, "candidate_block_size", 8);
}

void parse_engram(const json& j, V41Config& c) {
  auto& e = c.engram;
  if (has(j, "engram_layer_ids")) e.layer_ids = int_list(j, "engram_layer_ids");
  e.hash_vocab_size = positive(j, "engram_vocab_size", 16000000);
  e.max_ngram_size = positive(j, "engram_max_ngram_size", 4);
  e.n_heads = positive(j, "engram_n_heads", 8);
  e.head_dim = positive(j, "engram_head_dim", 256);
  e.compressed_vocab_size = positive(j, "engram_compressed_vocab_size", 99092);
  // The release spells it engram_pad_token_id; transformers reads engram_pad_id (both default 2).
  const int pad_release = get_or<int>(j, "engram_pad_token_id", -1), pad_hf = get_or<int>(j, "engram_pad_id", -1);
  if (pad_release >= 0 && pad_hf >= 0 && pad_release != pad_hf)
    throw Error(fmt::format("config.json: engram_pad_token_id ({}) and engram_pad_id ({}) disagree", pad_release,
                            pad_hf));
  e.pad_token_id = pad_release >= 0 ? pad_release : pad_hf >= 0 ? pad_hf : 2;
  if (e.layer_ids.empty()) return;

  if (e.max_ngram_size < 2)
    throw Error(fmt::format("config.json: engram_max_ngram_size must be at least 2, got {}", e.max_ngram_size));
  if (e.hash_vocab_size < 2) throw Error("config.json: engram_vocab_size must be at least 2");
  for (int l : e.layer_ids) {
    if (l < 0 || l >= c.num_layers)
      throw Error(fmt::format("config.json: engram_layer_ids {} must name layers in [0, {})", e.layer_ids,
                              c.num_layers));
    if (std::count(e.layer_ids.begin(), e.layer_ids.end(), l) > 1)
      throw Error(fmt::format("config.json: engram_layer_ids {} lists layer {} twice", e.layer_ids, l));
  }
  if (e.pad_token_id < 0 || e.pad_token_id >= c.vocab_size)
    throw Error(fmt::format("config.json: engram_pad_token_id {} is outside the vocabulary ({})", e.pad_token_id,
                            c.vocab_size));
  if (!has(j, "engram_num_embeddings"))
    throw Error("config.json: engram_num_embeddings (the rows of each Engram table) is missing");
  for (int rows : int_list(j, "engram_num_embeddings")) {
    if (rows <= 0)
      throw Error(fmt::format("config.json: engram_num_embeddings entries must be positive, got {}", rows));
    e.table_rows.push_back(rows);
  }
  if (e.table_rows.size() != e.layer_ids.size())
    throw Error(fmt::format("config.json: engram_num_embeddings has {} entries but engram_layer_ids has {}",
                            e.table_rows.size(), e.layer_ids.size()));
}

// The DSpark keys; a missing one takes the release's value (dsv41-model.md §8: block of 5, noise id
// 128799, Markov rank 256, 128 experts top-3, the last three layers as targets).
void parse_dspark(const json& j, V41Config& c) {
  if (c.num_nextn_predict_layers == 0) return;
  DSparkConfig d;
  d.n_stages = c.num_nextn_predict_layers;
  d.block_size = positive(j, "dspark_block_size", 5);
  d.noise_token_id = get_or<int>(j, "dspark_noise_token_id", 128799);
  d.markov_rank = positive(j, "dspark_markov_rank", 256);
  d.n_routed_experts = positive(j, "dspark_n_routed_experts", 128);
  d.experts_per_token = positive(j, "dspark_num_experts_per_tok", 3);
  if (has(j, "dspark_target_layer_ids")) {
    d.target_layers = int_list(j, "dspark_target_layer_ids");
  } else {
    for (int l = std::max(0, c.num_layers - 3); l < c.num_layers; ++l) d.target_layers.push_back(l);
  }
  if (d.target_layers.empty()) throw Error("config.json: dspark_target_layer_ids must not be empty");
  for (int l : d.target_layers)
    if (l < 0 || l >= c.num_layers)
      throw Error(fmt::format("config.json: dspark_target_layer_ids {} must name layers in [0, {})", d.target_layers,
                              c.num_layers));
  if (d.noise_token_id < 0 || d.noise_token_id >= c.vocab_size)
    throw Error(fmt::format("config.json: dspark_noise_token_id {} is outside the vocabulary ({})", d.noise_token_id,
                            c.vocab_size));
  if (d.experts_per_token > d.n_routed_experts)
    throw Error(fmt::format("config.json: dspark_num_experts_per_tok ({}) exceeds dspark_n_routed_experts ({})",
                            d.experts_per_token, d.n_routed_experts));
  c.dspark = std::move(d);
}

// The text parameters: `text_config` of the composite config, or the top level of a flat one.
const json& text_parameters(const json& j, V41Config& c) {
  const auto type = get_or<std::string>(j, "model_type", "");
  if (type == "deepseek_v41_text") return j;
  if (type != "deepseek_v41")
    throw Error(fmt::format("config.json: model_type '{}' is not DeepSeek-V4.1 (deepseek_v41)", type));
  c.image_token_id = get_or<int>(j, "image_token_id", 129264);
  if (has(j, "vision_config")) {
    c.has_vision_config = true;
    c.notes.push_back("config.json has a vision_config: images are not supported, only the text model is loaded");
  }
  if (!has(j, "text_config")) return j;  // transformers adopts text parameters given at the top level
  const json& text = j["text_config"];
  if (!text.is_object()) throw Error("config.json: text_config must be a JSON object");
  const auto text_type = get_or<std::string>(text, "model_type", "deepseek_v41_text");
  if (text_type != "deepseek_v41_text")
    throw Error(fmt::format("config.json: text_config.model_type '{}' is not deepseek_v41_text", text_type));
  return text;
}

}  // namespace

int EngramConfig::index_of(int layer) const {
  const auto it = std::find(layer_ids.begin(), layer_ids.end(), layer);
  return it == layer_ids.end() ? -1 : static_cast<int>(it - layer_ids.begin());
}

bool V41Config::is_kv_source(int layer) const { return contains(kv_source_layers, layer); }
bool V41Config::is_index_source(int layer) const { return contains(index_source_layers, layer); }

int V41Config::kv_source_of(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(compress_ratio.size()) || compress_ratio[layer] == 0) return -1;
  int best = -1;
  for (int s : kv_source_layers)
    if (s <= layer) best = std::max(best, s);
  return best;
}

V41Config V41Config::dspark_stage() const {
  if (!dspark) throw Error("the model has no DSpark drafter (num_nextn_predict_layers is 0)");
  V41Config s = *this;
  s.n_routed_experts = dspark->n_routed_experts;
  s.experts_per_token = dspark->experts_per_token;
  return s;
}

V41Config parse_v41_config(const json& j) {
  if (!j.is_object()) throw Error("config.json: top level must be a JSON object");
  V41Config c;
  const json& text = text_parameters(j, c);
  static_cast<CommonConfig&>(c) = parse_common_config(text, v41_flash_defaults(), "DeepSeek-V4.1");
  c.gate_temp = get_or<float>(text, "gate_temp", 1.0f);
  if (!(c.gate_temp > 0.0f)) throw Error(fmt::format("config.json: gate_temp must be positive, got {}", c.gate_temp));
  const auto act = get_or<std::string>(text, "hidden_act", "silu");
  if (act != "silu")
    throw Error(fmt::format("config.json: hidden_act '{}' is not supported (DeepSeek-V4.1 uses silu)", act));
  if (get_or<bool>(text, "tie_word_embeddings", false))
    throw Error("config.json: tie_word_embeddings is not supported (DeepSeek-V4.1 has its own head)");
  parse_schedule(text, c);
  parse_engram(text, c);
  parse_dspark(text, c);
  return c;
}

V41Config load_v41_config(const std::filesystem::path& model_dir) {
  return parse_v41_config(read_config_json(model_dir));
}

}  // namespace frank::model
