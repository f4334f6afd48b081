#include "frank/experts/baseline_plans.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "frank/core/error.h"
#include "frank/experts/usage_counts.h"

namespace frank::experts {
namespace {

void check_count(uint32_t n_layers, uint32_t n_experts, size_t cpu_experts) {
  const size_t total = size_t{n_layers} * n_experts;
  if (cpu_experts > total)
    throw Error(fmt::format("{} CPU experts requested but the model has only {} routed experts ({} layers x {})",
                            cpu_experts, total, n_layers, n_experts));
}

}  // namespace

ExpertPlan default_plan(const std::string& model_fingerprint, uint32_t n_layers, uint32_t n_experts,
                        size_t cpu_experts) {
  check_count(n_layers, n_experts, cpu_experts);
  std::vector<bool> mask(size_t{n_layers} * n_experts, false);
  for (uint32_t l = 0; l < n_layers; ++l) {
    const size_t here = cpu_experts / n_layers + (l < cpu_experts % n_layers ? 1 : 0);
    for (size_t i = 0; i < here; ++i) mask[size_t{l} * n_experts + (n_experts - 1 - i)] = true;
  }
  return plan_from_mask(
      model_fingerprint, n_layers, n_experts, mask,
      fmt::format("default ordering: highest expert ids of every layer, {} CPU experts", cpu_experts));
}

std::vector<bool> coldest_to_cpu(uint32_t n_layers, uint32_t n_experts, size_t cpu_experts,
                                 const std::vector<double>& heat) {
  check_count(n_layers, n_experts, cpu_experts);
  std::vector<uint32_t> order(heat.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (heat[a] != heat[b]) return heat[a] < heat[b];
    const uint32_t ea = a % n_experts, eb = b % n_experts;
    return ea != eb ? ea > eb : a < b;
  });
  std::vector<bool> mask(heat.size(), false);
  for (size_t i = 0; i < cpu_experts; ++i) mask[order[i]] = true;
  return mask;
}

ExpertPlan frequency_plan(const std::vector<RoutingTrace>& traces, size_t cpu_experts) {
  if (traces.empty()) throw Error("no routing traces given");
  const TraceHeader& h = traces.front().header;
  const UsageCounts counts = count_usage(traces);
  const std::vector<double> heat(counts.routings.begin(), counts.routings.end());
  return plan_from_mask(h.model_fingerprint, h.n_layers, h.n_experts,
                        coldest_to_cpu(h.n_layers, h.n_experts, cpu_experts, heat),
                        fmt::format("frequency ranking: the {} least-routed experts", cpu_experts));
}

}  // namespace frank::experts
