#include "frank/experts/cpu_cost_estimates.h"

#include <cmath>

#include "frank/experts/decayed_counts.h"
#include "frank/experts/simulator.h"
#include "frank/experts/step_usage.h"

namespace frank::experts {

std::vector<double> estimate_cpu_costs(const ExpertPlan& plan, const std::vector<RoutingTrace>& traces,
                                       size_t cache_slots, const CachePolicy& policy) {
  check_plan_fits_traces(plan, traces);
  const std::vector<bool> on_cpu = plan.cpu_mask();
  ExpertCache cache(on_cpu.size(), cache_slots, policy);
  DecayedCounts gpu_scores(on_cpu.size(), policy.half_life_steps);  // scored as the cache would
  StepUsage usage(plan.n_layers, plan.n_experts);
  std::vector<double> costs(on_cpu.size(), 0.0);
  std::vector<uint32_t> used_cpu, used_gpu;
  // A decayed step count S of an expert used r times per step settles at r / (1 - decay).
  const double decay = std::exp2(-1.0 / policy.half_life_steps);

  for (const auto& trace : traces) {
    for (const auto& step : trace.steps) {
      usage.load(step, trace.header.top_k);
      const bool counts = step.kind != StepKind::Prefill;
      const double threshold = cache.admission_threshold();
      used_cpu.clear();
      used_gpu.clear();
      for (uint32_t l = 0; l < plan.n_layers; ++l) {
        for (uint16_t e : usage.experts(l)) {
          const uint32_t id = l * plan.n_experts + e;
          if (on_cpu[id]) {
            used_cpu.push_back(id);
            if (counts && !cache.holds(id)) costs[id] += 1;
          } else {
            used_gpu.push_back(id);
            if (counts && !(gpu_scores.value(id) > threshold)) costs[id] += 1;
          }
        }
      }
      // The slot's price: with the cache full, a copy displaces the lowest-scored one, whose use
      // rate is (1 - decay) * threshold misses per step.
      if (counts && cache_slots > 0 && cache.size() == cache_slots) {
        const double price = (1 - decay) * threshold;
        for (uint32_t id = 0; id < on_cpu.size(); ++id)
          if (on_cpu[id] ? cache.holds(id) : gpu_scores.value(id) > threshold) costs[id] += price;
      }
      cache.end_step(used_cpu);
      gpu_scores.next_step();
      for (uint32_t id : used_gpu) gpu_scores.add(id);
    }
  }
  return costs;
}

}  // namespace frank::experts
