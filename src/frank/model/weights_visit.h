#pragma once
// The weight-visiting pieces DeepSeek-V4 (weights.cpp) and V4.1 (weights_v41.cpp) share: one slot per
// tensor, named by its official checkpoint key (`prefix` is "layers.3." or "mtp.0.").
#include <functional>
#include <string>
#include <vector>

#include "frank/model/config_common.h"
#include "frank/model/weights.h"

namespace frank::model::weights_visit {

using Visit = std::function<void(const WeightSlot&)>;
using Shape = std::vector<int64_t>;

WeightSlot linear_slot(std::string name, Shape shape, LinearWeight& w);

// mHC mapping of one site, named `<prefix><fn_name>` etc.
void visit_hc(const std::string& prefix, int n_out, int64_t in, HyperConnectionWeights& hc, int n_scales,
              const Visit& visit, const char* fn_name, const char* base_name, const char* scale_name);

// attn_norm, ffn_norm and the two per-layer mHC sites (hc_attn_*, hc_ffn_*).
void visit_layer_norms_and_hc(const CommonConfig& c, const std::string& prefix, Tensor& attn_norm, Tensor& ffn_norm,
                              HyperConnectionWeights& attn_hc, HyperConnectionWeights& ffn_hc, const Visit& visit);

// attn.wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, attn_sink.
void visit_attention_core(const CommonConfig& c, const std::string& prefix, AttentionCoreWeights& a,
                          const Visit& visit);

// ffn.gate.weight, ffn.gate.bias (scored layers), the routed experts and the shared expert.
void visit_moe(const CommonConfig& c, const std::string& prefix, bool hash_routed, MoeWeights& m, const Visit& visit);

}  // namespace frank::model::weights_visit
