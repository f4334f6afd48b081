// The cost model, decayed counts and the GPU cache policy, on hand-worked cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "frank/core/error.h"
#include "frank/experts/decayed_counts.h"
#include "frank/experts/expert_cache.h"
#include "frank/experts/expert_costs.h"

namespace frank::experts {
namespace {

TEST(ExpertCosts, DefaultsComeFromV4FlashExpertBytesAndBandwidth) {
  EXPECT_EQ(kV4FlashExpertBytes, 13369344.0);  // 3 x (4 MiB of FP4 + 256 KiB of scales)
  const ExpertCosts costs;
  EXPECT_NEAR(costs.cpu_seconds(), 13369344.0 / 100e9, 1e-15);  // 133.7 us
  EXPECT_NEAR(costs.gpu_seconds(), 13369344.0 / 4e12, 1e-15);   // 3.34 us
}

TEST(ExpertCosts, LayerTimeIsTheSlowerSide) {
  const ExpertCosts costs(10.0, 1.0);
  EXPECT_EQ(costs.layer_seconds(0, 0), 0.0);
  EXPECT_EQ(costs.layer_seconds(1, 6), 10.0);  // one CPU expert hides six GPU ones
  EXPECT_EQ(costs.layer_seconds(1, 12), 12.0);
  EXPECT_EQ(costs.layer_seconds(2, 0), 20.0);  // each CPU expert's weights are read once
}

TEST(ExpertCosts, RefusesNonPositiveCosts) {
  EXPECT_THROW(ExpertCosts(0.0, 1.0), Error);
  EXPECT_THROW(ExpertCosts(1.0, -1.0), Error);
  EXPECT_THROW(ExpertCosts(std::numeric_limits<double>::infinity(), 1.0), Error);
}

TEST(DecayedCounts, HalvesEveryHalfLife) {
  DecayedCounts counts(2, 2.0);
  counts.add(0);
  counts.next_step();
  counts.next_step();
  EXPECT_NEAR(counts.value(0), 0.5, 1e-12);
  counts.add(0);
  EXPECT_NEAR(counts.value(0), 1.5, 1e-12);
  EXPECT_EQ(counts.value(1), 0.0);
  EXPECT_THROW(DecayedCounts(1, 0.0), Error);
}

TEST(DecayedCounts, RescalesWithoutChangingValuesOrOrder) {
  DecayedCounts counts(2, 0.05);  // the unit grows 2^20 per step: a rescale within a few steps
  counts.add(0);
  counts.next_step();
  counts.add(1);
  bool rescaled = false;
  for (int i = 0; i < 40 && !rescaled; ++i) rescaled = counts.next_step();
  ASSERT_TRUE(rescaled);
  counts.add(0);
  EXPECT_NEAR(counts.value(0), 1.0, 1e-12);  // the old count decayed to nothing
  EXPECT_GT(counts.stored(0), counts.stored(1));
}

TEST(ExpertCache, FillsFreeSlotsHighestScoreFirstWithinTheFillBudget) {
  ExpertCache cache(10, 2, {1e9, 1});  // no decay to speak of, one copy per step
  EXPECT_EQ(cache.admission_threshold(), 0.0);
  EXPECT_EQ(cache.end_step(std::vector<uint32_t>{6, 5}), 1u);
  EXPECT_TRUE(cache.holds(5));  // tie on score: the lower id first
  EXPECT_FALSE(cache.holds(6));
  EXPECT_EQ(cache.end_step(std::vector<uint32_t>{6}), 1u);
  EXPECT_TRUE(cache.holds(6));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_NEAR(cache.admission_threshold(), 1.0, 1e-6);  // expert 5's score
}

TEST(ExpertCache, EvictsTheLowestScoreOnlyForAStrictlyHigherOne) {
  ExpertCache cache(10, 1, {1e9, 16});
  EXPECT_EQ(cache.end_step(std::vector<uint32_t>{6, 5}), 1u);  // equal scores: 6 does not displace 5
  EXPECT_TRUE(cache.holds(5));
  EXPECT_FALSE(cache.holds(6));
  EXPECT_EQ(cache.end_step(std::vector<uint32_t>{6}), 1u);  // 6 -> 2 > 1: evicts 5
  EXPECT_TRUE(cache.holds(6));
  EXPECT_FALSE(cache.holds(5));
  EXPECT_EQ(cache.size(), 1u);
}

TEST(ExpertCache, DecayLetsRecentUseWin) {
  ExpertCache cache(10, 1, {1.0, 16});                                   // counts halve every step
  for (int i = 0; i < 3; ++i) cache.end_step(std::vector<uint32_t>{1});  // 1 -> 1.75
  EXPECT_TRUE(cache.holds(1));
  cache.end_step(std::vector<uint32_t>{});   // 1 -> 0.875
  cache.end_step(std::vector<uint32_t>{2});  // 1 -> 0.4375, 2 -> 1: replaces 1
  EXPECT_TRUE(cache.holds(2));
  EXPECT_FALSE(cache.holds(1));
  EXPECT_NEAR(cache.score(1), 0.4375, 1e-12);
}

TEST(ExpertCache, NoSlotsNoCopies) {
  ExpertCache cache(4, 0, {});
  EXPECT_EQ(cache.end_step(std::vector<uint32_t>{1, 2}), 0u);
  EXPECT_FALSE(cache.holds(1));
  EXPECT_TRUE(std::isinf(cache.admission_threshold()));
}

}  // namespace
}  // namespace frank::experts
