#pragma once
// Planning estimate, before the run: how noisy one block's effect will be, from earlier rows of
// the same metric, and the smallest improvement the design's rule would detect with 80% power.
// An estimate for choosing blocks and draws, not a result: it assumes normal block effects and
// that the earlier rows' noise is the noise to come.
//
// Noise (Kalibera & Jones 2013: variance sits at several levels). Earlier rows are grouped into
// starts (block, arm, start); values are divided by their arm's mean so several arms pool. A
// one-way analysis of variance by start gives
//   draw variance  s_d^2 = within-start mean square,
//   start variance s_s^2 = max(0, (between-start mean square - s_d^2) / n0),
// n0 the usual unbalanced-group size (N - sum_a sum_{g in a} n_g^2 / N_a) / (G - A). With one draw
// per start the two cannot be separated: s_s^2 is then the between-start mean square and s_d^2 = 0
// (conservative). An arm's block value averages s starts of d draws, so the relative effect of a
// block, treatment/baseline - 1 ~ (T - B) / mean for small effects, has
//   sd_e = sqrt(2 (s_s^2 / s + s_d^2 / (s d))).
//
// Detectable improvement delta (positive = better) at power 0.8 over k blocks, by rule:
//   all_blocks_better  P(every block improves) = Phi(delta / sd_e)^k = 0.8 (exact for normal effects)
//   sign_test          the smallest q = P(a block improves) with P(Binomial(k, q) >= c) = 0.8, c the
//                      fewest improved blocks with p <= alpha; delta = sd_e Phi^-1(q)
//   permutation        delta = (t_{1-alpha, k-1} + t_{0.8, k-1}) sd_e / sqrt(k): the usual t
//                      approximation of a one-sided paired t-test, whose power the permutation test
//                      shares for normal effects
//   bands              delta = adopt_if_lower_at_least x + (t_{0.975, k-1} + t_{0.8, k-1}) sd_e / sqrt(k),
//                      for the interval's lower end to clear the adopt line.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frank/lab/design.h"
#include "frank/lab/row.h"

namespace frank::lab {

inline constexpr double kPlanningPower = 0.8;

struct NoiseEstimate {
  int64_t rows = 0, starts = 0;
  double mean = 0.0;             // of the earlier values (covariate-adjusted if the design adjusts)
  double start_variance = 0.0;   // relative (divided by the arm mean squared)
  double draw_variance = 0.0;    // relative; 0 when not separable
  bool separated = true;         // false: one draw per start, start_variance holds both
  double block_effect_sd = 0.0;  // sd_e under the design's starts and draws
};

// Throws frank::Error when the rows cannot give an estimate (fewer than two starts of any arm,
// a non-positive arm mean, a missing covariate the design adjusts with).
NoiseEstimate estimate_noise(const std::vector<Row>& earlier, const Design& design);

// nullopt when the rule cannot reach 80% power at any effect (one block for a t-based rule, or
// fewer improved blocks than the sign test needs).
std::optional<double> detectable_improvement(const Design& design, double block_effect_sd);

}  // namespace frank::lab
