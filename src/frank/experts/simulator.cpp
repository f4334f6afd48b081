#include "frank/experts/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "frank/core/error.h"
#include "frank/experts/step_usage.h"

namespace frank::experts {
namespace {

// Per-step values of one group of steps, summarised at the end.
struct GroupSamples {
  std::vector<double> cpu_routings, cpu_experts, seconds;
  uint64_t tokens = 0;
  size_t zero_miss = 0;

  void add(uint64_t step_tokens, uint64_t routings, uint64_t experts, double step_seconds) {
    cpu_routings.push_back(static_cast<double>(routings));
    cpu_experts.push_back(static_cast<double>(experts));
    seconds.push_back(step_seconds);
    tokens += step_tokens;
    zero_miss += routings == 0;
  }

  StepGroupReport report() const {
    StepGroupReport r;
    r.steps = seconds.size();
    r.tokens = tokens;
    r.cpu_routings = summarize(cpu_routings);
    r.cpu_experts = summarize(cpu_experts);
    r.zero_miss_steps = zero_miss;
    r.zero_miss_fraction = r.steps ? static_cast<double>(zero_miss) / static_cast<double>(r.steps) : 0.0;
    r.step_seconds = summarize(seconds);
    return r;
  }
};

}  // namespace

Summary summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  auto rank = [&](double p) { return values[static_cast<size_t>(std::max(1.0, std::ceil(p * n))) - 1]; };
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  s.p50 = rank(0.50);
  s.p90 = rank(0.90);
  s.p99 = rank(0.99);
  return s;
}

void check_plan_fits_traces(const ExpertPlan& plan, const std::vector<RoutingTrace>& traces) {
  if (traces.empty()) throw Error("no routing traces given");
  for (const auto& t : traces) {
    if (t.header.model_fingerprint != plan.model_fingerprint)
      throw Error(fmt::format("routing trace '{}' is for model '{}' but the plan is for '{}'", t.source,
                              t.header.model_fingerprint, plan.model_fingerprint));
    if (t.header.n_layers != plan.n_layers || t.header.n_experts != plan.n_experts)
      throw Error(fmt::format("routing trace '{}' has {} layers x {} experts but the plan has {} x {}", t.source,
                              t.header.n_layers, t.header.n_experts, plan.n_layers, plan.n_experts));
  }
}

SimulationReport simulate(const ExpertPlan& plan, const std::vector<RoutingTrace>& traces, size_t cache_slots,
                          const ExpertCosts& costs, const CachePolicy& policy) {
  check_plan_fits_traces(plan, traces);
  const std::vector<bool> on_cpu = plan.cpu_mask();
  ExpertCache cache(on_cpu.size(), cache_slots, policy);
  StepUsage usage(plan.n_layers, plan.n_experts);
  GroupSamples generation, prefill, all;
  SimulationReport report;
  std::vector<uint32_t> used_cpu;

  for (const auto& trace : traces) {
    for (const auto& step : trace.steps) {
      usage.load(step, trace.header.top_k);
      uint64_t cpu_routings = 0, cpu_experts = 0;
      double seconds = 0;
      used_cpu.clear();
      for (uint32_t l = 0; l < plan.n_layers; ++l) {
        const auto experts = usage.experts(l);
        const auto routings = usage.routings(l);
        size_t on_cpu_now = 0, on_gpu_now = 0;
        for (size_t i = 0; i < experts.size(); ++i) {
          const uint32_t id = l * plan.n_experts + experts[i];
          if (!on_cpu[id]) {
            ++on_gpu_now;
            continue;
          }
          used_cpu.push_back(id);
          report.cpu_homed_routings += routings[i];
          if (cache.holds(id)) {
            ++on_gpu_now;
            report.cache_hit_routings += routings[i];
          } else {
            ++on_cpu_now;
            cpu_routings += routings[i];
          }
        }
        seconds += costs.layer_seconds(on_cpu_now, on_gpu_now);
        cpu_experts += on_cpu_now;
      }
      report.cache_fills += cache.end_step(used_cpu);
      (step.kind == StepKind::Prefill ? prefill : generation).add(usage.tokens(), cpu_routings, cpu_experts, seconds);
      all.add(usage.tokens(), cpu_routings, cpu_experts, seconds);
    }
  }
  report.generation = generation.report();
  report.prefill = prefill.report();
  report.all = all.report();
  report.cache_hit_rate = report.cpu_homed_routings ? static_cast<double>(report.cache_hit_routings) /
                                                          static_cast<double>(report.cpu_homed_routings)
                                                    : 0.0;
  return report;
}

}  // namespace frank::experts
