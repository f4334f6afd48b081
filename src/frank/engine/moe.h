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

// What DeepSeek-V4.1's MoE does differently from V4's (dsv41-model.md §7), each as transformers
// computes it: the router logits are divided by gate_temp before sqrt-softplus, and the routing
// weight scales the expert's fp32 activation before `down` (V4: the expert's output after it).
struct MoeVariant {
  float gate_temp = 1.0f;
  bool weight_before_down = false;
};

// One token's routing; `token` is needed by hash layers. `forced`, when given, holds the token's
// experts_per_token experts (routing replay, routing_replay.h): they replace the choice, and their
// weights follow from the scores as a chosen set's do.
Routing route(const model::CommonConfig& c, const model::MoeWeights& w, bool hash_layer, const float* x, int32_t token,
              float gate_temp = 1.0f, const int32_t* forced = nullptr);

// down(weight * silu(min(gate·x, limit)) * clamp(up·x, -limit, limit)), written to out [hidden].
void swiglu_expert(const model::ExpertWeights& e, float limit, const float* x, float* out, float weight = 1.0f);

// x: [n, hidden] (after post_attention_layernorm), tokens: the n token ids. Returns [n, hidden].
// `chosen`, when given, receives each token's routed experts in the router's order, token-major.
// `forced`, when given, [n, experts_per_token]: each token's experts instead of the router's choice.
Tensor moe_forward(const model::CommonConfig& c, const model::MoeWeights& w, bool hash_layer, const Tensor& x,
                   const std::vector<int32_t>& tokens, std::vector<int32_t>* chosen = nullptr,
                   const MoeVariant& variant = {}, const int32_t* forced = nullptr);

}  // namespace frank::engine
