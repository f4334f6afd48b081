#pragma once
// Plans that need no search: the default ordering (no traffic known) and a plain per-expert
// frequency ranking (the baseline the plan builder must match or beat).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "frank/experts/expert_plan.h"
#include "frank/experts/routing_trace.h"

namespace frank::experts {

// The default ordering: every layer gets floor(N / n_layers) CPU experts, the first
// N mod n_layers layers one more, and in each layer the highest expert ids go to the CPU.
// Expert ids carry no popularity (a trained router's experts are interchangeable), so this is a
// traffic-blind, evenly spread plan, like KTransformers' `uniform` placement.
ExpertPlan default_plan(const std::string& model_fingerprint, uint32_t n_layers, uint32_t n_experts,
                        size_t cpu_experts);

// The N experts with the fewest routings in the traces (all steps, all layers ranked together)
// go to the CPU; ties follow the default ordering (higher expert id, then lower layer, first).
ExpertPlan frequency_plan(const std::vector<RoutingTrace>& traces, size_t cpu_experts);

// The N experts with the lowest `heat` go to the CPU, ties as in frequency_plan. Throws
// frank::Error when N exceeds the number of experts.
std::vector<bool> coldest_to_cpu(uint32_t n_layers, uint32_t n_experts, size_t cpu_experts,
                                 const std::vector<double>& heat);

}  // namespace frank::experts
