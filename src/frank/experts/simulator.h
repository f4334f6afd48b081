#pragma once
// `frank plan simulate`: replays routing traces step by step against a plan and a GPU cache and
// predicts what the CPU does. Traces are replayed in the order given with one cache throughout,
// as one server would serve them. Per step it counts
//   - CPU routings: routings to CPU-homed experts that have no GPU copy (they run on the CPU),
//   - CPU experts: the distinct such experts (each one's weights are read from RAM once),
//   - whether the step had zero CPU misses (the key metric: such a step never waits for the CPU),
//   - the predicted expert time (expert_costs.h).
// Generation steps (decode and verify) are reported apart from prefill chunks: they are the steps
// the CPU/GPU split serves, and the objective the plan builder minimises.
#include <cstdint>
#include <vector>

#include "frank/experts/expert_cache.h"
#include "frank/experts/expert_costs.h"
#include "frank/experts/expert_plan.h"
#include "frank/experts/routing_trace.h"

namespace frank::experts {

// Mean and nearest-rank percentiles (the p-th percentile is the ceil(p * n)-th smallest value).
struct Summary {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};
Summary summarize(std::vector<double> values);

struct StepGroupReport {
  size_t steps = 0;
  uint64_t tokens = 0;
  Summary cpu_routings;  // per step
  Summary cpu_experts;   // per step
  size_t zero_miss_steps = 0;
  double zero_miss_fraction = 0;  // of this group's steps
  Summary step_seconds;           // predicted expert time per step
};

struct SimulationReport {
  StepGroupReport generation;  // decode and verify steps
  StepGroupReport prefill;
  StepGroupReport all;
  uint64_t cpu_homed_routings = 0;  // routings to CPU-homed experts, cached or not
  uint64_t cache_hit_routings = 0;  // ... served by a GPU copy
  double cache_hit_rate = 0;        // cache_hit_routings / cpu_homed_routings (0 when there are none)
  uint64_t cache_fills = 0;         // copies started (PCIe traffic)
};

// Throws frank::Error naming the trace when a trace is not for the plan's model (fingerprint or shape).
void check_plan_fits_traces(const ExpertPlan& plan, const std::vector<RoutingTrace>& traces);

SimulationReport simulate(const ExpertPlan& plan, const std::vector<RoutingTrace>& traces, size_t cache_slots,
                          const ExpertCosts& costs, const CachePolicy& policy = {});

}  // namespace frank::experts
