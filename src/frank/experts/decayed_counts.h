#pragma once
// Exponentially decayed event counts: after each step every count is multiplied by
// 2^(-1 / half_life_steps), so an event half_life_steps ago weighs half as much as one now.
//
// Decaying n counts every step would cost O(n); instead counts are stored in a unit that grows by
// 2^(1 / half_life_steps) per step (an event adds the current unit), and value() divides by the
// unit. Stored values keep their order under decay, so callers may order by stored(). When the
// unit grows past 1e200 everything is rescaled once (next_step() then returns true and stored
// values change, order unchanged).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace frank::experts {

class DecayedCounts {
 public:
  DecayedCounts(size_t n, double half_life_steps);  // throws frank::Error unless half_life_steps > 0

  // Ends a step: every count decays. Returns true when stored values were rescaled.
  bool next_step();
  void add(uint32_t id) { stored_[id] += unit_; }
  double value(uint32_t id) const { return stored_[id] / unit_; }
  double stored(uint32_t id) const { return stored_[id]; }

 private:
  std::vector<double> stored_;
  double growth_;  // 2^(1 / half_life_steps)
  double unit_ = 1.0;
};

}  // namespace frank::experts
