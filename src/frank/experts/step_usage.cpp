#include "frank/experts/step_usage.h"

#include <algorithm>

namespace frank::experts {

StepUsage::StepUsage(uint32_t n_layers, uint32_t n_experts)
    : experts_(n_layers), routings_(n_layers), position_(n_experts, -1) {}

void StepUsage::load(const RoutingStep& step, uint32_t top_k) {
  tokens_ = 0;
  for (size_t l = 0; l < experts_.size(); ++l) {
    auto& experts = experts_[l];
    auto& routings = routings_[l];
    experts.clear();
    routings.clear();
    for (uint16_t e : step.layers[l]) {
      if (position_[e] < 0) {
        position_[e] = static_cast<int32_t>(experts.size());
        experts.push_back(e);
        routings.push_back(0);
      }
      ++routings[static_cast<size_t>(position_[e])];
    }
    for (uint16_t e : experts) position_[e] = -1;
    tokens_ = std::max<uint64_t>(tokens_, step.layers[l].size() / top_k);
  }
}

}  // namespace frank::experts
