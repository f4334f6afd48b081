#include "frank/model/synthetic.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "frank/core/error.h"
#include "frank/model/weight_init.h"

namespace frank::model {

std::vector<std::string> synthetic_names() { return {"tiny", "tiny-chat", "tiny-chat-mtp"}; }

ModelConfig synthetic_config(const std::string& name) {
  const auto names = synthetic_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw Error(fmt::format("unknown synthetic model '{}' (available: {})", name, fmt::join(names, ", ")));
  ModelConfig c;
  // tiny-chat has DeepSeek-V4's real vocabulary, so the real tokenizer and chat encoding work on it.
  c.vocab_size = name.starts_with("tiny-chat") ? 129280 : 256;
  c.hidden_size = 64;
  c.num_layers = 6;
  c.num_heads = 4;
  c.head_dim = 32;
  c.rope_dim = 8;
  c.q_lora_rank = 32;
  c.o_groups = 2;
  c.o_lora_rank = 16;
  c.n_routed_experts = 8;
  c.experts_per_token = 2;
  c.moe_intermediate_size = 32;
  c.sliding_window = 8;
  c.index_n_heads = 16;
  c.index_head_dim = 16;
  c.index_topk = 4;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.routed_scaling_factor = 1.5f;
  c.max_position_embeddings = 1048576;
  c.num_nextn_predict_layers = name == "tiny-chat-mtp" ? 1 : 0;
  c.rope_main = RopeSpec{10000.0};
  c.rope_compress = RopeSpec{160000.0, true, 16.0, 65536, 32.0, 1.0};
  using K = AttentionKind;
  c.attention = {K::Sliding, K::Sliding, K::CompressedSparse, K::HeavilyCompressed, K::CompressedSparse,
                 K::HeavilyCompressed};
  c.compress_ratio = {0, 0, 4, 16, 4, 16};
  c.hash_routed = {true, true, true, false, false, false};
  return c;
}

ModelConfig v4_flash_config(int layers) {
  if (layers < 1 || layers > 43) throw Error(fmt::format("--layers {}: DeepSeek-V4-Flash has 1 to 43 layers", layers));
  ModelConfig c;
  c.model_type = "deepseek_v4";
  c.vocab_size = 129280;
  c.hidden_size = 4096;
  c.num_layers = layers;
  c.num_heads = 64;
  c.head_dim = 512;
  c.rope_dim = 64;
  c.q_lora_rank = 1024;
  c.o_groups = 8;
  c.o_lora_rank = 1024;
  c.n_routed_experts = 256;
  c.experts_per_token = 6;
  c.moe_intermediate_size = 2048;
  c.sliding_window = 128;
  c.index_n_heads = 64;
  c.index_head_dim = 128;
  c.index_topk = 512;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.routed_scaling_factor = 1.5f;
  c.max_position_embeddings = 1048576;
  c.rope_main = RopeSpec{10000.0};
  c.rope_compress = RopeSpec{160000.0, true, 16.0, 65536, 32.0, 1.0};
  for (int l = 0; l < layers; ++l) {
    using K = AttentionKind;
    const K kind = l < 2 ? K::Sliding : (l % 2 == 0 ? K::CompressedSparse : K::HeavilyCompressed);
    c.attention.push_back(kind);
    c.compress_ratio.push_back(kind == K::Sliding ? 0 : (kind == K::CompressedSparse ? 4 : 128));
    c.hash_routed.push_back(l < 3);
  }
  return c;
}

namespace {

// Hash layers: each token gets experts_per_token distinct experts.
void fill_hash_tables(const ModelConfig& c, ModelWeights& w, Gaussian& g) {
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.hash_routed[l]) continue;
    auto& table = w.layers[l].moe.tid2eid;
    std::vector<int32_t> experts(c.n_routed_experts);
    for (int t = 0; t < c.vocab_size; ++t) {
      for (int e = 0; e < c.n_routed_experts; ++e) experts[e] = e;
      for (int i = 0; i < c.experts_per_token; ++i) {
        const auto j = i + static_cast<int>(g.bits() % static_cast<uint64_t>(c.n_routed_experts - i));
        std::swap(experts[i], experts[j]);
        table.push_back(experts[i]);
      }
    }
  }
}

}  // namespace

ModelWeights skeleton_weights(const ModelConfig& c, uint64_t seed) {
  ModelWeights w;
  Gaussian g(seed);
  for_each_weight(c, w, [&](const WeightSlot& slot) {
    if (slot.role == WeightRole::Linear || slot.role == WeightRole::Embedding) {
      *slot.dst = Tensor();
      slot.dst->shape = slot.shape;
      return;
    }
    *slot.dst = Tensor(slot.shape);
    for (auto& v : slot.dst->data) v = role_sample(slot.role, slot.shape, g);
  });
  fill_hash_tables(c, w, g);
  return w;
}

ModelWeights random_weights(const ModelConfig& c, uint64_t seed) {
  ModelWeights w;
  if (c.num_nextn_predict_layers > 0) w.mtp.emplace();
  Gaussian g(seed);
  for_each_weight(c, w, [&](const WeightSlot& slot) {
    *slot.dst = Tensor(slot.shape);
    for (auto& v : slot.dst->data) v = role_sample(slot.role, slot.shape, g);
  });
  fill_hash_tables(c, w, g);
  return w;
}

LoadedModel synthetic_model(const std::string& name, uint64_t seed) {
  LoadedModel m;
  m.config = synthetic_config(name);
  m.weights = random_weights(m.config, seed);
  return m;
}

}  // namespace frank::model
