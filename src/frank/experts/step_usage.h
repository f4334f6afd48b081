#pragma once
// The experts one step used: per layer, each distinct expert and how many of the step's tokens
// chose it. Costs follow distinct experts (weights are read once per step), routing counts
// follow tokens; the simulator and the plan builder need both.
#include <cstdint>
#include <span>
#include <vector>

#include "frank/experts/routing_trace.h"

namespace frank::experts {

class StepUsage {
 public:
  StepUsage(uint32_t n_layers, uint32_t n_experts);

  void load(const RoutingStep& step, uint32_t top_k);
  uint64_t tokens() const { return tokens_; }
  std::span<const uint16_t> experts(size_t layer) const { return experts_[layer]; }    // distinct, in first-use order
  std::span<const uint32_t> routings(size_t layer) const { return routings_[layer]; }  // parallel to experts()

 private:
  std::vector<std::vector<uint16_t>> experts_;
  std::vector<std::vector<uint32_t>> routings_;
  std::vector<int32_t> position_;  // scratch: expert -> index in experts_[layer], or -1
  uint64_t tokens_ = 0;
};

}  // namespace frank::experts
