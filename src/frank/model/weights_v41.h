#pragma once
// V41Weights: every tensor of the DeepSeek-V4.1 text model (dsv41-model.md §9), grouped as the
// forward pass will use them. Parts V4 has too reuse V4's structs (weights.h); Linear weights are
// [out, in] and may stay in the checkpoint's FP8/FP4.
#include <functional>
#include <optional>
#include <vector>

#include "frank/model/config_v41.h"
#include "frank/model/weights.h"
#include "frank/model/weights_dspark.h"

namespace frank::model {

// CSA2 compressor of a KV-source layer: no overlap, no position bias (§5.1).
struct V41CompressorWeights {
  LinearWeight kv_proj;                   // wkv [head_dim, hidden]
  std::optional<LinearWeight> gate_proj;  // wgate [head_dim, hidden], ratio-2 sources only
  Tensor norm;                            // [head_dim]
};

// Indexer of an index-source layer (§5.2). Only KV sources own the key projection; a Reindex layer
// scores its own query against its KV source's keys.
struct V41IndexerWeights {
  LinearWeight q_b_proj;                // wq_b [index_heads*index_head_dim, q_lora]
  LinearWeight weights_proj;            // [index_heads, hidden]
  std::optional<LinearWeight> k_proj;   // wk [index_head_dim, head_dim], KV sources only
  Tensor k_norm;                        // [index_head_dim], KV sources only
};

struct V41AttentionWeights : AttentionCoreWeights {
  std::optional<V41CompressorWeights> compressor;  // KV sources
  std::optional<V41IndexerWeights> indexer;        // index sources
};

// Engram of one layer (§6): the table is gathered by hash id, wkv maps the gathered rows to one key
// per mHC stream plus a shared value, q_weight*k_weight weights the gate's dot product.
struct V41EngramWeights {
  Tensor table;       // [rows, engram head_dim], fp32 (a float checkpoint table is used unscaled)
  LinearWeight wkv;   // [(hc_mult+1)*hidden, hash_columns*head_dim]
  Tensor q_weight;    // [hc_mult, hidden]
  Tensor k_weight;    // [hc_mult, hidden]
};

struct V41LayerWeights {
  Tensor attn_norm, ffn_norm;
  HyperConnectionWeights attn_hc, ffn_hc;
  V41AttentionWeights attn;
  MoeWeights moe;              // router, gate.bias, experts, shared expert (never hash-routed)
  Tensor image_selection_bias;  // gate.bias_vl [experts]: replaces gate.bias for image tokens (unused: text only)
  std::optional<V41EngramWeights> engram;
};

struct V41Weights {
  Tensor embed;       // [vocab, hidden]
  LinearWeight head;  // [vocab, hidden]
  Tensor norm;        // [hidden]
  std::vector<V41LayerWeights> layers;  // no hyper-head: the final collapse uses the last layer's pre (§3)
  std::optional<DSparkWeights> dspark;  // when the config declares DSpark and the checkpoint ships mtp.*
};

// Lays out `w` for `config` and calls `visit` once per tensor, named by its released checkpoint key
// (`layers.1.engram.embed.weight` for the Engram table). Existing values are kept. The DSpark
// drafter's tensors are visited when `w.dspark` is set.
void for_each_v41_weight(const V41Config& config, V41Weights& w, const std::function<void(const WeightSlot&)>& visit);

}  // namespace frank::model
