#include "frank/lab/guards.h"

#include <fmt/format.h>

#include "frank/core/error.h"

namespace frank::lab {

DriftCheck check_drift(const DriftGuard& guard, const std::vector<BlockStarts>& blocks) {
  std::vector<double> drifts;
  for (const BlockStarts& b : blocks) drifts.push_back(b.baseline_value() / guard.reference_mean - 1.0);
  DriftCheck c{guard, t_interval(drifts, 0.90), false};
  // With one block the interval is NaN and both comparisons are false: no equivalence shown.
  c.pass = c.drift.lower > -guard.max_relative_drift && c.drift.upper < guard.max_relative_drift;
  return c;
}

QualityCheck check_quality(const QualityGuard& guard, const std::vector<BlockStarts>& blocks) {
  std::vector<double> worsening;
  for (const BlockStarts& b : blocks) {
    double w = guard.better == Better::Lower ? b.difference() : -b.difference();
    if (guard.scale == QualityGuard::Scale::Relative) {
      if (!(b.baseline_value() > 0.0))
        throw Error(
            fmt::format("quality guard \"{}\": block {} has a baseline of {}; a relative change needs a "
                        "positive baseline",
                        guard.metric, b.block, b.baseline_value()));
      w /= b.baseline_value();
    }
    worsening.push_back(w);
  }
  QualityCheck c{guard, t_interval(worsening, 0.90), false};
  c.pass = c.worsening.upper < guard.margin;
  return c;
}

}  // namespace frank::lab
