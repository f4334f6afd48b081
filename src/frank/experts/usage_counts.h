#pragma once
// Per-expert totals over routing traces, indexed layer * n_experts + expert.
#include <cstdint>
#include <vector>

#include "frank/experts/routing_trace.h"

namespace frank::experts {

struct UsageCounts {
  std::vector<uint64_t> routings;          // token choices, all steps
  std::vector<uint64_t> generation_steps;  // decode and verify steps that used the expert
};

// The traces must share one header shape (read_traces checks this).
UsageCounts count_usage(const std::vector<RoutingTrace>& traces);

}  // namespace frank::experts
