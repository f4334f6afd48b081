#include "frank/experts/expert_homes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "frank/core/error.h"
#include "frank/core/packed_bytes.h"
#include "frank/core/tensor.h"
#include "frank/experts/baseline_plans.h"
#include "frank/experts/model_fingerprint.h"

namespace frank::experts {

ExpertHomes::ExpertHomes(int n_layers, int n_experts)
    : n_layers_(n_layers), n_experts_(n_experts), on_cpu_(static_cast<size_t>(n_layers) * n_experts, 0) {}

ExpertHomes::ExpertHomes(const ExpertPlan& plan, const model::ModelConfig& config)
    : ExpertHomes(config.num_layers, config.n_routed_experts) {
  if (plan.n_layers != static_cast<uint32_t>(n_layers_) || plan.n_experts != static_cast<uint32_t>(n_experts_))
    throw Error(fmt::format("expert plan: it places {} layers x {} experts but the model has {} x {}", plan.n_layers,
                            plan.n_experts, n_layers_, n_experts_));
  for (int l = 0; l < n_layers_; ++l)
    for (const uint16_t e : plan.cpu_experts[static_cast<size_t>(l)]) on_cpu_[index(l, e)] = 1;
}

std::span<const uint8_t> ExpertHomes::layer(int layer) const {
  return std::span<const uint8_t>(on_cpu_).subspan(index(layer, 0), static_cast<size_t>(n_experts_));
}

size_t ExpertHomes::cpu_count() const { return static_cast<size_t>(std::count(on_cpu_.begin(), on_cpu_.end(), 1)); }

size_t ExpertHomes::cpu_count(int layer) const {
  const auto flags = this->layer(layer);
  return static_cast<size_t>(std::count(flags.begin(), flags.end(), 1));
}

GpuWeightBytes gpu_weight_bytes(const model::ModelConfig& config, const model::ModelWeights& weights,
                                int linear_value_bytes, const LinearBytes& linear_bytes) {
  // The layout alone (shapes, no data) of a model like `weights`, walked by name; laid out first so
  // that its routed experts' matrices can be paired with the model's own.
  model::ModelWeights layout;
  if (weights.mtp) layout.mtp.emplace();
  model::for_each_weight(config, layout, [](const model::WeightSlot&) {});
  std::unordered_map<const LinearWeight*, const QuantizedMatrix*> quantized_experts;
  for (size_t l = 0; l < std::min(layout.layers.size(), weights.layers.size()); ++l) {
    const auto& mine = layout.layers[l].moe.experts;
    const auto& theirs = weights.layers[l].moe.experts;
    for (size_t e = 0; e < std::min(mine.size(), theirs.size()); ++e)
      for (auto part : {&model::ExpertWeights::gate, &model::ExpertWeights::up, &model::ExpertWeights::down})
        if (const LinearWeight& m = theirs[e].*part; m.quantized) quantized_experts[&(mine[e].*part)] = &*m.quantized;
  }
  GpuWeightBytes bytes;
  double routed = 0;
  model::for_each_weight(config, layout, [&](const model::WeightSlot& s) {
    const bool linear = s.role == model::WeightRole::Linear;
    const auto q = linear ? quantized_experts.find(s.linear) : quantized_experts.end();
    const double values = static_cast<double>(Tensor::count(s.shape));
    const double b = q != quantized_experts.end() ? static_cast<double>(packed_bytes(*q->second))
                     : linear && linear_bytes     ? linear_bytes(s)
                                                  : values * (linear ? linear_value_bytes : 4);
    (s.name.starts_with("layers.") && s.name.find(".ffn.experts.") != std::string::npos ? routed : bytes.other) += b;
  });
  for (const auto& layer : weights.layers) bytes.other += static_cast<double>(layer.moe.tid2eid.size()) * 4;
  const double experts = static_cast<double>(config.num_layers) * config.n_routed_experts;
  bytes.routed_expert = experts > 0 ? routed / experts : 0;
  return bytes;
}

size_t usable_cache_slots(const ExpertHomes& homes, size_t cache_slots) {
  return std::min(cache_slots, homes.cpu_count());
}

ExpertHomes choose_expert_homes(const model::ModelConfig& config, const GpuWeightBytes& bytes,
                                const HomeRequest& request) {
  const size_t total = static_cast<size_t>(config.num_layers) * config.n_routed_experts;
  std::optional<size_t> gpu_room;  // routed experts that fit the budget
  if (request.budget_gb) {
    const double budget = *request.budget_gb * 1e9;
    if (!(budget > bytes.other))
      throw Error(fmt::format("--gpu-memory-budget {} GB is too small: the weights other than routed experts need "
                              "{:.2f} GB of GPU memory on their own",
                              *request.budget_gb, bytes.other / 1e9));
    gpu_room = static_cast<size_t>(std::min<double>(std::floor((budget - bytes.other) / bytes.routed_expert),
                                                    static_cast<double>(total)));
  }
  if (request.plan_path.empty()) {
    if (!gpu_room || *gpu_room == total) return ExpertHomes(config.num_layers, config.n_routed_experts);
    // Some experts go to the CPU, so the slots are used: g GPU-homed experts and S slots must fit
    // the room R (S < T - g here: otherwise g + S >= T > R), so g = R - S.
    if (*gpu_room < request.cache_slots)
      throw Error(fmt::format("--gpu-memory-budget {} GB has room for {} routed experts, fewer than the {} GPU cache "
                              "slots (--expert-cache-slots, one expert each): lower the slots or raise the budget",
                              *request.budget_gb, *gpu_room, request.cache_slots));
    return ExpertHomes(default_plan(model_fingerprint(config), static_cast<uint32_t>(config.num_layers),
                                    static_cast<uint32_t>(config.n_routed_experts),
                                    total - (*gpu_room - request.cache_slots)),
                       config);
  }
  ExpertHomes homes(load_plan(request.plan_path, model_fingerprint(config)), config);
  const size_t on_gpu = total - homes.cpu_count(), slots = usable_cache_slots(homes, request.cache_slots);
  if (gpu_room && on_gpu + slots > *gpu_room)
    throw Error(fmt::format("expert plan '{}' keeps {} routed experts on the GPU and {} cache slots ({:.2f} GB with "
                            "the rest of the weights) but --gpu-memory-budget {} GB has room for {}",
                            request.plan_path, on_gpu, slots,
                            (bytes.other + static_cast<double>(on_gpu + slots) * bytes.routed_expert) / 1e9,
                            *request.budget_gb, *gpu_room));
  return homes;
}

}  // namespace frank::experts
