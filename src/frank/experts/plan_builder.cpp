#include "frank/experts/plan_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "frank/core/error.h"
#include "frank/experts/baseline_plans.h"
#include "frank/experts/cpu_cost_estimates.h"
#include "frank/experts/simulator.h"

namespace frank::experts {
namespace {

// One round's candidate: up to `block` swaps of the CPU-homed experts that cost most with the
// GPU-homed experts estimated to cost least if CPU-homed. A pair is swapped only when the saving
// is significant against Poisson noise in the counts:
//   cost(cpu) - cost(gpu) > z * sqrt(cost(cpu) + cost(gpu)),
// so the search does not chase differences that another sample of the same traffic would not show.
std::vector<bool> swap_round(const std::vector<bool>& cpu_mask, const std::vector<double>& cost, size_t block,
                             double z) {
  std::vector<uint32_t> cpu, gpu;
  for (uint32_t id = 0; id < cpu_mask.size(); ++id) (cpu_mask[id] ? cpu : gpu).push_back(id);
  const size_t n = std::min({block, cpu.size(), gpu.size()});
  auto by = [&](auto better) {
    return [&, better](uint32_t a, uint32_t b) { return cost[a] != cost[b] ? better(cost[a], cost[b]) : a < b; };
  };
  std::partial_sort(cpu.begin(), cpu.begin() + static_cast<std::ptrdiff_t>(n), cpu.end(), by(std::greater<>()));
  std::partial_sort(gpu.begin(), gpu.begin() + static_cast<std::ptrdiff_t>(n), gpu.end(), by(std::less<>()));
  std::vector<bool> mask = cpu_mask;
  for (size_t i = 0; i < n; ++i) {
    const double saved = cost[cpu[i]], added = cost[gpu[i]];
    if (saved - added <= z * std::sqrt(saved + added)) break;  // pairs only get worse from here
    mask[cpu[i]] = false;
    mask[gpu[i]] = true;
  }
  return mask;
}

// The first and second half of every trace's steps: proposals come from the first, and a round is
// kept only if it also scores better on the second, which it has not seen.
std::pair<std::vector<RoutingTrace>, std::vector<RoutingTrace>> split_traces(const std::vector<RoutingTrace>& traces) {
  std::vector<RoutingTrace> first, second;
  for (const auto& t : traces) {
    const auto half = static_cast<std::ptrdiff_t>(t.steps.size() / 2);
    first.push_back({t.source, t.header, {t.steps.begin(), t.steps.begin() + half}});
    second.push_back({t.source, t.header, {t.steps.begin() + half, t.steps.end()}});
  }
  return {std::move(first), std::move(second)};
}

}  // namespace

bool PlanScore::better_than(const PlanScore& other) const {
  if (seconds_per_step != other.seconds_per_step) return seconds_per_step < other.seconds_per_step;
  return zero_miss_fraction > other.zero_miss_fraction;
}

PlanScore score_plan(const ExpertPlan& plan, const std::vector<RoutingTrace>& traces, size_t cache_slots,
                     const ExpertCosts& costs, const CachePolicy& policy) {
  const SimulationReport r = simulate(plan, traces, cache_slots, costs, policy);
  const StepGroupReport& g = r.generation.steps ? r.generation : r.all;
  return {g.step_seconds.mean, g.zero_miss_fraction};
}

PlanBuild build_plan(const std::vector<RoutingTrace>& traces, size_t cpu_experts, size_t cache_slots,
                     const ExpertCosts& costs, const BuildOptions& options) {
  if (traces.empty()) throw Error("no routing traces given");
  const TraceHeader& h = traces.front().header;
  const auto [proposal, validation] = split_traces(traces);
  auto score = [&](const ExpertPlan& plan, const std::vector<RoutingTrace>& on) {
    return score_plan(plan, on, cache_slots, costs, options.cache);
  };

  PlanBuild best;
  best.plan = frequency_plan(traces, cpu_experts);
  PlanScore validated = score(best.plan, validation);
  best.log.push_back({"frequency ranking", validated, 0, true});
  size_t block = std::max<size_t>(1, cpu_experts / 16);
  best.stop_reason = fmt::format("{} rounds done", options.max_rounds);
  for (size_t round = 1; round <= options.max_rounds; ++round) {
    if (block == 0) {
      best.stop_reason = fmt::format("round {}: the block of swaps is empty", round);
      break;
    }
    const std::vector<bool> mask = best.plan.cpu_mask();
    const std::vector<double> costs = estimate_cpu_costs(best.plan, proposal, cache_slots, options.cache);
    const std::vector<bool> swapped = swap_round(mask, costs, block, options.significance);
    size_t moved = 0;
    for (size_t i = 0; i < mask.size(); ++i) moved += mask[i] && !swapped[i];
    if (moved == 0) {
      best.stop_reason = fmt::format("round {}: no significant swap left", round);
      break;
    }
    ExpertPlan candidate = plan_from_mask(h.model_fingerprint, h.n_layers, h.n_experts, swapped, "");
    const PlanScore candidate_score = score(candidate, validation);
    const bool better = candidate_score.better_than(validated);
    best.log.push_back({fmt::format("round {}", round), candidate_score, moved, better});
    if (better) {
      best.plan = std::move(candidate);
      validated = candidate_score;
    } else {
      block = moved / 2;  // the block overshot: retry from the same plan with fewer swaps
    }
  }
  best.score = score(best.plan, traces);
  best.plan.description = fmt::format(
      "frank plan build: {} CPU experts, {} cache slots; predicted {:.1f} us per generation step, {:.1f}% zero-miss "
      "steps on the build traces",
      cpu_experts, cache_slots, best.score.seconds_per_step * 1e6, best.score.zero_miss_fraction * 100);
  return best;
}

}  // namespace frank::experts
