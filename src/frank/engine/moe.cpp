#include "frank/engine/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "frank/cpu/ops.h"
#include "frank/engine/indexer.h"

namespace frank::engine {

Routing route(const model::CommonConfig& c, const model::MoeWeights& w, bool hash_layer, const float* x,
              int32_t token, float gate_temp, const int32_t* forced) {
  const int E = c.n_routed_experts, k = c.experts_per_token;
  std::vector<float> scores(E);
  cpu::linear(x, 1, w.router, scores.data());
  for (auto& s : scores) s = std::sqrt(cpu::softplus(s / gate_temp));

  Routing r;
  if (forced != nullptr) {
    r.experts.assign(forced, forced + k);
  } else if (hash_layer) {
    r.experts.assign(w.tid2eid.begin() + int64_t{token} * k, w.tid2eid.begin() + int64_t{token + 1} * k);
  } else {
    // The bias steers which experts are chosen; it never enters the weights. Ties: lower expert first.
    std::vector<float> biased(E);
    for (int e = 0; e < E; ++e) biased[e] = scores[e] + w.selection_bias.data[e];
    for (int64_t e : top_k_indices(biased, k)) r.experts.push_back(static_cast<int32_t>(e));
  }
  float sum = 0.0f;
  for (int32_t e : r.experts) sum += scores[e];
  for (int32_t e : r.experts) r.weights.push_back(scores[e] / (sum + 1e-20f) * c.routed_scaling_factor);
  return r;
}

void swiglu_expert(const model::ExpertWeights& e, float limit, const float* x, float* out, float weight) {
  const int64_t inter = e.gate.rows();
  std::vector<float> gate(inter), up(inter);
  cpu::linear(x, 1, e.gate, gate.data());
  cpu::linear(x, 1, e.up, up.data());
  for (int64_t i = 0; i < inter; ++i) gate[i] = cpu::silu(std::min(gate[i], limit)) * std::clamp(up[i], -limit, limit);
  if (weight != 1.0f)
    for (auto& g : gate) g *= weight;
  cpu::linear(gate.data(), 1, e.down, out);
}

Tensor moe_forward(const model::CommonConfig& c, const model::MoeWeights& w, bool hash_layer, const Tensor& x,
                   const std::vector<int32_t>& tokens, std::vector<int32_t>* chosen, const MoeVariant& variant,
                   const int32_t* forced) {
  const int D = c.hidden_size;
  Tensor out({x.rows(), int64_t{D}});
  std::vector<float> y(D);
  for (int64_t t = 0; t < x.rows(); ++t) {
    const Routing r = route(c, w, hash_layer, x.row(t), tokens[t], variant.gate_temp,
                            forced != nullptr ? forced + t * c.experts_per_token : nullptr);
    if (chosen != nullptr) chosen->insert(chosen->end(), r.experts.begin(), r.experts.end());
    // Accumulate in ascending expert id, as transformers' expert loop does, then add the shared expert.
    std::vector<size_t> order(r.experts.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r.experts[a] < r.experts[b]; });
    float* o = out.row(t);
    for (size_t i : order) {
      if (variant.weight_before_down) {
        swiglu_expert(w.experts[r.experts[i]], c.swiglu_limit, x.row(t), y.data(), r.weights[i]);
        for (int d = 0; d < D; ++d) o[d] += y[d];
      } else {
        swiglu_expert(w.experts[r.experts[i]], c.swiglu_limit, x.row(t), y.data());
        for (int d = 0; d < D; ++d) o[d] += y[d] * r.weights[i];
      }
    }
    swiglu_expert(w.shared, c.swiglu_limit, x.row(t), y.data());
    for (int d = 0; d < D; ++d) o[d] += y[d];
  }
  return out;
}

}  // namespace frank::engine
