#pragma once
// DeepSeek-V4 MoE (dsv4-model.md §6): sqrt(softplus) router scores; experts chosen by top-k of
// score + selection bias (scored layers) or by a fixed token->experts table (hash layers); weights
// are the chosen unbiased scores normalised to sum 1, times routed_scaling_factor; clamped SwiGLU
// experts plus one always-on shared expert.
#include <cstdint>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::engine {

struct Routing {
  std::vector<int32_t> experts;  // [experts_per_token]
  std::vector<float> weights;    // [experts_per_token]
};

// One token's routing; `token` is needed by hash layers.
Routing route(const model::ModelConfig& c, const model::MoeWeights& w, bool hash_layer, const float* x, int32_t token);

// down(silu(min(gate·x, limit)) * clamp(up·x, -limit, limit)), written to out [hidden].
void swiglu_expert(const model::ExpertWeights& e, float limit, const float* x, float* out);

// x: [n, hidden] (after post_attention_layernorm), tokens: the n token ids. Returns [n, hidden].
// `chosen`, when given, receives each token's routed experts in the router's order, token-major.
Tensor moe_forward(const model::ModelConfig& c, const model::MoeWeights& w, bool hash_layer, const Tensor& x,
                   const std::vector<int32_t>& tokens, std::vector<int32_t>* chosen = nullptr);

}  // namespace frank::engine
