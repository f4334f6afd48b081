#pragma once
// `frank plan diff A B`: which experts move between two plans of the same model.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "frank/experts/expert_plan.h"

namespace frank::experts {

struct LayerMoves {
  uint32_t layer = 0;
  std::vector<uint16_t> to_cpu;  // GPU-homed in A, CPU-homed in B
  std::vector<uint16_t> to_gpu;  // CPU-homed in A, GPU-homed in B
};

struct PlanDiff {
  std::vector<LayerMoves> layers;  // only layers where something moves, ascending
  size_t to_cpu = 0, to_gpu = 0;
};

// Throws frank::Error when the plans are for different models (fingerprint or shape).
PlanDiff diff_plans(const ExpertPlan& a, const ExpertPlan& b);

}  // namespace frank::experts
