#include "frank/experts/decayed_counts.h"

#include <fmt/format.h>

#include <cmath>

#include "frank/core/error.h"

namespace frank::experts {

DecayedCounts::DecayedCounts(size_t n, double half_life_steps) : stored_(n, 0.0) {
  if (!(half_life_steps > 0) || !std::isfinite(half_life_steps))
    throw Error(fmt::format("decay half-life {} steps is not a positive number", half_life_steps));
  growth_ = std::exp2(1.0 / half_life_steps);
}

bool DecayedCounts::next_step() {
  unit_ *= growth_;
  if (unit_ < 1e200) return false;
  for (double& s : stored_) s /= unit_;
  unit_ = 1.0;
  return true;
}

}  // namespace frank::experts
