#pragma once
// The guards a design may declare, each a test with its margin fixed in advance.
//
// Drift (two one-sided tests, TOST, at 5%): per block, drift = baseline value / reference_mean - 1;
// the guard passes iff the 90% t-interval of the mean drift lies inside (-margin, +margin), i.e. the
// baseline is shown to measure what it measured before.
//
// Quality (non-inferiority at 5%): per block, the treatment's worsening on the guard metric,
// absolute (treatment - baseline, turned so that positive is worse) or relative (that divided by
// the baseline); the guard passes iff the one-sided 95% upper bound of the mean worsening (the
// upper end of the 90% t-interval) is below the margin.
#include <string>
#include <vector>

#include "frank/lab/block_starts.h"
#include "frank/lab/design.h"
#include "frank/lab/mean_interval.h"

namespace frank::lab {

struct DriftCheck {
  DriftGuard guard;
  MeanInterval drift;  // 90% interval of baseline / reference_mean - 1
  bool pass = false;
};

struct QualityCheck {
  QualityGuard guard;
  MeanInterval worsening;  // 90% interval; upper is the one-sided 95% bound
  bool pass = false;
};

DriftCheck check_drift(const DriftGuard& guard, const std::vector<BlockStarts>& blocks);
QualityCheck check_quality(const QualityGuard& guard, const std::vector<BlockStarts>& blocks);

}  // namespace frank::lab
