#pragma once
// `frank plan build`: a plan with exactly N CPU experts (so memory use does not move) that
// minimises the predicted expert time per generation step on the traces, cache included
// (docs/expert-plans.md, "Plan builder").
//
// Objective (lower is better): the mean predicted expert time of the generation steps (decode and
// verify; all steps when the traces have none) from simulate(); ties go to more zero-miss steps.
// Search, a greedy local search started from the plain frequency ranking:
//   - each round estimates, for every expert, the CPU misses it would cause if CPU-homed under the
//     current plan and cache (cpu_cost_estimates.h), and proposes up to `block` swaps: the CPU-homed
//     experts that cost most with the GPU-homed experts estimated to cost least, as long as the
//     difference is significant against the counts' Poisson noise;
//   - estimates come from the first half of every trace and the proposal is scored on the second
//     half, which it has not seen; it is kept if it scores better there, else the block is halved;
//   - the search stops after max_rounds, when no significant swap is left, or the block is empty.
// So a swap must help on traffic it was not derived from: the search cannot overfit its way below
// the frequency ranking, which it returns unchanged when nothing survives validation.
#include <cstddef>
#include <string>
#include <vector>

#include "frank/experts/expert_cache.h"
#include "frank/experts/expert_costs.h"
#include "frank/experts/expert_plan.h"
#include "frank/experts/routing_trace.h"

namespace frank::experts {

struct PlanScore {
  double seconds_per_step = 0;    // mean predicted expert time per generation step
  double zero_miss_fraction = 0;  // of generation steps
  bool better_than(const PlanScore& other) const;
};

PlanScore score_plan(const ExpertPlan& plan, const std::vector<RoutingTrace>& traces, size_t cache_slots,
                     const ExpertCosts& costs, const CachePolicy& policy = {});

struct BuildOptions {
  CachePolicy cache;
  size_t max_rounds = 12;
  double significance = 2.0;  // z of the per-pair Poisson test
};

struct BuildLogEntry {
  std::string candidate;
  PlanScore score;  // on the validation halves
  size_t swaps = 0;
  bool kept = false;
};

struct PlanBuild {
  ExpertPlan plan;
  PlanScore score;                 // on all the traces
  std::vector<BuildLogEntry> log;  // every plan scored on the validation halves, in order
  std::string stop_reason;
};

PlanBuild build_plan(const std::vector<RoutingTrace>& traces, size_t cpu_experts, size_t cache_slots,
                     const ExpertCosts& costs, const BuildOptions& options = {});

}  // namespace frank::experts
