#pragma once
// What each expert would cost on the CPU under a plan and its cache: the plan builder's per-expert
// signal (docs/expert-plans.md, "Plan builder").
//
// Replaying the traces with `plan` and the cache, an expert's estimate sums, over the generation
// steps, the CPU misses it causes, in expert-weight reads:
//   - a step that used it while it had no GPU copy costs 1. For a CPU-homed expert that is an
//     actual miss; a GPU-homed one is scored as the cache would score it and counts as copied
//     while its decayed step count is above the cache's admission threshold;
//   - a step in which it holds a copy (or would) costs the slot's price: with the cache full, the
//     copy displaces the lowest-scored one, whose use rate, (1 - decay) * threshold per step, is
//     the misses the displaced expert now causes.
// Frequency counts every use the same; this estimate is low for experts whose uses come in bursts
// the cache serves, so such experts can live on the CPU at little cost, and it charges hot experts
// for the cache room they would take. It ignores that moving many experts at once moves the
// threshold; the builder simulates every proposal before keeping it.
#include <cstddef>
#include <vector>

#include "frank/experts/expert_cache.h"
#include "frank/experts/expert_plan.h"
#include "frank/experts/routing_trace.h"

namespace frank::experts {

// Indexed layer * n_experts + expert.
std::vector<double> estimate_cpu_costs(const ExpertPlan& plan, const std::vector<RoutingTrace>& traces,
                                       size_t cache_slots, const CachePolicy& policy);

}  // namespace frank::experts
