// The statistics of one estimand: per-block effects, the sign test, the within-block permutation
// test (exact and Monte Carlo) and the t-interval, against the scipy/exact-fraction fixture and
// against cases worked by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "frank/core/error.h"
#include "frank/lab/block_starts.h"
#include "frank/lab/effect_summary.h"
#include "frank/lab/mean_interval.h"
#include "frank/lab/permutation_test.h"
#include "frank/lab/sign_test.h"
#include "lab_test_util.h"

namespace frank::lab {
namespace {

std::vector<BlockStarts> blocks_of(const std::vector<Row>& rows, const std::string& baseline = "main",
                                   const std::string& treatment = "fast") {
  return group_blocks(rows, baseline, treatment, [](const Row& r) { return r.metrics.at("time_s"); });
}

EffectSummary summarize(const std::vector<Row>& rows, Better better, uint64_t seed = 1) {
  return summarize_effects(blocks_of(rows), better, 100000, seed, "as_measured");
}

TEST(LabStatistics, MatchesScipyAndExactEnumeration) {
  for (const auto& c : test::lab_fixture("effects.json")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    std::vector<Row> rows;
    for (const auto& r : c.at("rows"))
      rows.push_back(test::make_row(r[0], r[1] == "base" ? "main" : "fast", r[3], r[2], int64_t(rows.size())));
    const Better better = c.at("better") == "lower" ? Better::Lower : Better::Higher;
    const EffectSummary s = summarize(rows, better);
    ASSERT_EQ(s.blocks.size(), c.at("effects").size());
    for (size_t b = 0; b < s.blocks.size(); ++b) {
      EXPECT_NEAR(s.blocks[b].baseline, c.at("baseline_values")[b], 1e-12);
      EXPECT_NEAR(s.blocks[b].treatment, c.at("treatment_values")[b], 1e-12);
      EXPECT_NEAR(s.blocks[b].effect, c.at("effects")[b], 1e-14);
    }
    EXPECT_NEAR(s.mean_effect, c.at("mean_effect"), 1e-14);
    if (c.at("ci95").is_null()) {
      EXPECT_TRUE(std::isnan(s.ci95.lower) && std::isnan(s.ci95.upper));
    } else {
      EXPECT_NEAR(s.ci95.lower, c.at("ci95")[0], 1e-11);
      EXPECT_NEAR(s.ci95.upper, c.at("ci95")[1], 1e-11);
    }
    EXPECT_EQ(s.sign.better, c.at("sign_better"));
    EXPECT_EQ(s.sign.worse, c.at("sign_worse"));
    EXPECT_EQ(s.sign.ties, c.at("sign_ties"));
    EXPECT_NEAR(s.sign.p_better, c.at("sign_test_p"), 1e-14);
    EXPECT_NEAR(s.sign.p_worse, c.at("sign_test_p_worse"), 1e-14);
    EXPECT_EQ(s.permutation.assignments, c.at("permutation_assignments"));
    const double p = c.at("permutation_p"), p_worse = c.at("permutation_p_worse");
    if (c.contains("scipy_monte_carlo_p")) {
      // Monte Carlo with 100,000 samples: within 4 standard errors of the exact p.
      EXPECT_FALSE(s.permutation.exact);
      EXPECT_EQ(s.permutation.samples, 100000);
      const double se = std::sqrt(p * (1 - p) / 100000);
      EXPECT_NEAR(s.permutation.p_better, p, 4 * se + 1e-5);
      EXPECT_NEAR(s.permutation.p_worse, p_worse, 4 * std::sqrt(p_worse * (1 - p_worse) / 100000) + 1e-5);
    } else {
      EXPECT_TRUE(s.permutation.exact);
      EXPECT_DOUBLE_EQ(s.permutation.p_better, p);
      EXPECT_DOUBLE_EQ(s.permutation.p_worse, p_worse);
    }
  }
}

TEST(LabStatistics, ThreeBlocksAllBetterByHand) {
  const EffectSummary s = summarize(test::paired_rows({{10, 9}, {10, 9.5}, {12, 11}}), Better::Lower);
  EXPECT_EQ(s.sign.better, 3);
  EXPECT_EQ(s.sign.p_better, 0.125);  // 0.5^3
  EXPECT_EQ(s.sign.p_worse, 1.0);
  EXPECT_EQ(s.permutation.assignments, 8.0);  // 2^3 label swaps
  EXPECT_EQ(s.permutation.p_better, 0.125);   // only the observed assignment is as low
  EXPECT_EQ(s.permutation.p_worse, 1.0);
}

TEST(LabStatistics, PermutationOfThreeMixedBlocksByHand) {
  // Effects -0.1, +0.1, -0.05 (sum -0.05); swapped 1/9, -1/11, 1/19. Of the 8 sums, 3 are <= -0.05
  // (observed, -0.1-1/11-0.05, -0.1-1/11+1/19) and 6 are >= -0.05.
  const EffectSummary s = summarize(test::paired_rows({{10, 9}, {10, 11}, {10, 9.5}}), Better::Lower);
  EXPECT_EQ(s.permutation.p_better, 3.0 / 8);
  EXPECT_EQ(s.permutation.p_worse, 6.0 / 8);
  const EffectSummary higher = summarize(test::paired_rows({{10, 9}, {10, 11}, {10, 9.5}}), Better::Higher);
  EXPECT_EQ(higher.permutation.p_better, 6.0 / 8);
  EXPECT_EQ(higher.sign.better, 1);
}

TEST(LabStatistics, PermutationOverStartsByHand) {
  // One block, baseline starts 10 and 12, treatment starts 9 and 11 (one draw each). The C(4, 2) = 6
  // labellings give treatment sets {10,12} +0.1, {10,9} -0.174, {10,11} 0, {12,9} 0, {12,11} +0.211,
  // {9,11} -1/11 (observed): 2 of 6 at or below, 5 of 6 at or above.
  std::vector<Row> rows = {test::make_row(0, "main", 10, 0), test::make_row(0, "main", 12, 1),
                           test::make_row(0, "fast", 9, 0), test::make_row(0, "fast", 11, 1)};
  const EffectSummary s = summarize(rows, Better::Lower);
  EXPECT_EQ(s.permutation.assignments, 6.0);
  EXPECT_DOUBLE_EQ(s.mean_effect, 10.0 / 11 - 1);
  EXPECT_DOUBLE_EQ(s.permutation.p_better, 2.0 / 6);
  EXPECT_DOUBLE_EQ(s.permutation.p_worse, 5.0 / 6);
}

TEST(LabStatistics, MonteCarloIsSeededAndBoundedBelow) {
  std::vector<std::pair<double, double>> pairs;
  for (int b = 0; b < 22; ++b) pairs.push_back({100.0 + b, 90.0 + b});  // every block better
  const auto rows = test::paired_rows(pairs);
  const EffectSummary a = summarize(rows, Better::Lower, 42), again = summarize(rows, Better::Lower, 42);
  EXPECT_FALSE(a.permutation.exact);
  EXPECT_EQ(a.permutation.assignments, std::ldexp(1.0, 22));
  EXPECT_EQ(a.permutation.p_better, again.permutation.p_better);
  // The exact p is 2^-22, far below what 100,000 samples resolve: (1 + 0) / (1 + 100000) at best.
  EXPECT_GE(a.permutation.p_better, 1.0 / 100001);
  EXPECT_LE(a.permutation.p_better, 3.0 / 100001);
  EXPECT_EQ(a.permutation.p_worse, 1.0);
}

TEST(LabStatistics, SignTestDropsTies) {
  const SignTest s = sign_test({1.0, 0.0, -1.0, 2.0});
  EXPECT_EQ(s.better, 2);
  EXPECT_EQ(s.worse, 1);
  EXPECT_EQ(s.ties, 1);
  EXPECT_EQ(s.p_better, 0.5);                      // P(X >= 2), X ~ Bin(3, 1/2)
  EXPECT_EQ(s.p_worse, 0.875);                     // P(X >= 1)
  EXPECT_EQ(sign_test({0.0, 0.0}).p_better, 1.0);  // nothing signed: no evidence
}

TEST(LabStatistics, TIntervalByHand) {
  const MeanInterval m = t_interval({1.0, 2.0, 3.0}, 0.95);
  EXPECT_EQ(m.mean, 2.0);
  EXPECT_EQ(m.sd, 1.0);
  const double half = 4.302652729749464 / std::sqrt(3.0);  // t_{0.975, 2} = 4.3027
  EXPECT_NEAR(m.lower, 2.0 - half, 1e-9);
  EXPECT_NEAR(m.upper, 2.0 + half, 1e-9);
  const MeanInterval one = t_interval({5.0}, 0.95);
  EXPECT_EQ(one.mean, 5.0);
  EXPECT_TRUE(std::isnan(one.lower));
  EXPECT_THROW(t_interval({}, 0.95), Error);
}

TEST(LabStatistics, RelativeEffectsNeedPositiveValues) {
  EXPECT_THROW(summarize(test::paired_rows({{10, 9}, {0, 1}}), Better::Lower), Error);
  EXPECT_THROW(summarize(test::paired_rows({{10, 9}, {-2, -1}}), Better::Lower), Error);
}

}  // namespace
}  // namespace frank::lab
