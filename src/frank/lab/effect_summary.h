#pragma once
// The statistics of one estimand: per-block values and relative effects, their mean, the exact
// sign test, the within-block permutation test and the 95% t-interval of the mean effect.
// Effects are treatment/baseline - 1 (negative = smaller); "improvement" is the effect turned so
// that positive means better in the metric's direction.
#include <cstdint>
#include <string>
#include <vector>

#include "frank/lab/block_starts.h"
#include "frank/lab/design.h"
#include "frank/lab/mean_interval.h"
#include "frank/lab/permutation_test.h"
#include "frank/lab/sign_test.h"

namespace frank::lab {

struct BlockEffect {
  int64_t block = 0;
  double baseline = 0.0, treatment = 0.0;  // mean over the arm's draws in the block
  int64_t baseline_draws = 0, treatment_draws = 0;
  double effect = 0.0;
};

struct EffectSummary {
  std::string estimand;  // "as_measured", "fixed_covariate" or "end_to_end"
  std::vector<BlockEffect> blocks;
  double mean_effect = 0.0;
  MeanInterval ci95;
  SignTest sign;
  PermutationTest permutation;
};

inline double improvement(double effect, Better better) { return better == Better::Lower ? -effect : effect; }

// Throws frank::Error if a start's mean is not positive: relative effects need positive values.
EffectSummary summarize_effects(const std::vector<BlockStarts>& blocks, Better better, int64_t monte_carlo_samples,
                                uint64_t seed, std::string estimand);

}  // namespace frank::lab
