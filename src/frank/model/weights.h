#pragma once
// ModelWeights: every tensor of a DeepSeek-V4 model, grouped as the forward pass uses them: fp32,
// except Linear weights, which may stay in the checkpoint's FP8/FP4 (LinearWeight). Shapes follow
// the checkpoint (Linear weights are [out, in]).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "frank/core/linear_weight.h"
#include "frank/core/tensor.h"
#include "frank/model/config.h"

namespace frank::model {

// mHC mapping of one site: fn [(2+N)*N, N*D], base [(2+N)*N], scale [3].
struct HyperConnectionWeights {
  Tensor fn, base, scale;
};

// A compressor pools `ratio` tokens into one entry. The CSA kind ("overlapping") projects to two
// halves (Ca, Cb) of `dim` each; the HCA kind to one half.
struct CompressorWeights {
  LinearWeight kv_proj, gate_proj;  // [halves*dim, hidden]
  Tensor position_bias;       // [ratio, halves*dim]
  Tensor norm;                // [dim]
};

struct IndexerWeights {
  CompressorWeights compressor;  // overlapping, dim = index_head_dim
  LinearWeight q_b_proj;         // [index_n_heads*index_head_dim, q_lora_rank]
  LinearWeight weights_proj;     // [index_n_heads, hidden]
};

// What every attention layer of V4 and V4.1 has: low-rank Q, one K=V head, sinks, grouped output.
struct AttentionCoreWeights {
  LinearWeight q_a_proj;  // [q_lora, hidden]
  Tensor q_a_norm;        // [q_lora]
  LinearWeight q_b_proj;  // [heads*head_dim, q_lora]
  LinearWeight kv_proj;   // [head_dim, hidden]
  Tensor kv_norm;         // [head_dim]
  LinearWeight o_a_proj;  // [o_groups*o_lora, heads*head_dim/o_groups]
  LinearWeight o_b_proj;  // [hidden, o_groups*o_lora]
  Tensor sinks;           // [heads]
};

struct AttentionWeights : AttentionCoreWeights {
  std::optional<CompressorWeights> compressor;  // CSA and HCA layers
  std::optional<IndexerWeights> indexer;        // CSA layers
};

// SwiGLU expert: gate = w1 [I, hidden], up = w3 [I, hidden], down = w2 [hidden, I].
struct ExpertWeights {
  LinearWeight gate, up, down;
};

struct MoeWeights {
  LinearWeight router;           // [experts, hidden]
  Tensor selection_bias;         // [experts], scored layers only: biases the choice, not the weights
  std::vector<int32_t> tid2eid;  // [vocab, experts_per_token], hash layers only
  std::vector<ExpertWeights> experts;
  ExpertWeights shared;
};

struct LayerWeights {
  Tensor attn_norm, ffn_norm;
  HyperConnectionWeights attn_hc, ffn_hc;
  AttentionWeights attn;
  MoeWeights moe;
};

// The multi-token-prediction block (dsv4-model.md §7): it shares the main embedding and head.
struct MtpWeights {
  LinearWeight e_proj, h_proj;     // [hidden, hidden]: the next token's embedding, the main streams
  Tensor enorm, hnorm, norm;       // [hidden]
  HyperConnectionWeights hc_head;  // its own hyper-head
  LayerWeights block;              // a decoder layer: sliding attention, scored MoE
};

struct ModelWeights {
  Tensor embed;  // [vocab, hidden]
  LinearWeight head;  // [vocab, hidden]
  Tensor norm;   // [hidden]
  HyperConnectionWeights hc_head;  // fn [N, N*D], base [N], scale [1]
  std::vector<LayerWeights> layers;
  std::optional<MtpWeights> mtp;  // when the checkpoint ships mtp.0.*
};

// What a weight is, for initialisers that need to know (synthetic models).
enum class WeightRole { Linear, Embedding, NormWeight, HcFn, HcBase, HcScale, Sink, PositionBias, SelectionBias };

// One weight of the model: its official checkpoint name, shape and destination. `dst` is the fp32
// tensor; for Linear weights it is `linear->dense`, and a loader may fill `linear->quantized`
// instead when the checkpoint ships the weight in FP8/FP4.
struct WeightSlot {
  std::string name;
  std::vector<int64_t> shape;
  WeightRole role;
  Tensor* dst;
  LinearWeight* linear = nullptr;
};

// Lays out `w` for `config` (sizes the per-layer vectors, sets up missing optional parts; existing
// values are kept, so it also walks a filled model) and calls `visit`
// once per fp32 tensor, experts included. tid2eid tables are not fp32 and are not visited.
// The MTP block's weights (official names mtp.0.*) are visited when `w.mtp` is set.
void for_each_weight(const ModelConfig& config, ModelWeights& w, const std::function<void(const WeightSlot&)>& visit);
void for_each_mtp_weight(const ModelConfig& config, MtpWeights& w, const std::function<void(const WeightSlot&)>& visit);

}  // namespace frank::model
