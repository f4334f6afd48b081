#include "frank/experts/usage_counts.h"

#include "frank/experts/step_usage.h"

namespace frank::experts {

UsageCounts count_usage(const std::vector<RoutingTrace>& traces) {
  UsageCounts counts;
  if (traces.empty()) return counts;
  const TraceHeader& h = traces.front().header;
  counts.routings.assign(size_t{h.n_layers} * h.n_experts, 0);
  counts.generation_steps.assign(counts.routings.size(), 0);
  StepUsage usage(h.n_layers, h.n_experts);
  for (const auto& trace : traces) {
    for (const auto& step : trace.steps) {
      usage.load(step, h.top_k);
      for (uint32_t l = 0; l < h.n_layers; ++l) {
        const auto experts = usage.experts(l);
        const auto routings = usage.routings(l);
        for (size_t i = 0; i < experts.size(); ++i) {
          const size_t id = size_t{l} * h.n_experts + experts[i];
          counts.routings[id] += routings[i];
          if (step.kind != StepKind::Prefill) ++counts.generation_steps[id];
        }
      }
    }
  }
  return counts;
}

}  // namespace frank::experts
