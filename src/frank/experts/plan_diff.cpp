#include "frank/experts/plan_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "frank/core/error.h"

namespace frank::experts {

PlanDiff diff_plans(const ExpertPlan& a, const ExpertPlan& b) {
  if (a.model_fingerprint != b.model_fingerprint || a.n_layers != b.n_layers || a.n_experts != b.n_experts)
    throw Error(fmt::format("the plans are for different models: '{}' ({}x{}) and '{}' ({}x{})", a.model_fingerprint,
                            a.n_layers, a.n_experts, b.model_fingerprint, b.n_layers, b.n_experts));
  PlanDiff diff;
  for (uint32_t l = 0; l < a.n_layers; ++l) {
    LayerMoves moves{l, {}, {}};
    // cpu_experts lists are ascending (parse_plan and plan_from_mask keep them so).
    std::set_difference(b.cpu_experts[l].begin(), b.cpu_experts[l].end(), a.cpu_experts[l].begin(),
                        a.cpu_experts[l].end(), std::back_inserter(moves.to_cpu));
    std::set_difference(a.cpu_experts[l].begin(), a.cpu_experts[l].end(), b.cpu_experts[l].begin(),
                        b.cpu_experts[l].end(), std::back_inserter(moves.to_gpu));
    if (moves.to_cpu.empty() && moves.to_gpu.empty()) continue;
    diff.to_cpu += moves.to_cpu.size();
    diff.to_gpu += moves.to_gpu.size();
    diff.layers.push_back(std::move(moves));
  }
  return diff;
}

}  // namespace frank::experts
