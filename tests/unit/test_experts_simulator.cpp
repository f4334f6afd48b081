// The simulator on a hand-worked trace: every count, percentile and predicted time below is
// worked out in the comments from the documented cache policy and cost model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frank/core/error.h"
#include "frank/experts/simulator.h"

namespace frank::experts {
namespace {

using ::testing::HasSubstr;

const char* kFingerprint = "m/2x4/top2";

// 2 layers x 4 experts, top-2. CPU-homed: layer 0 experts 2 and 3, layer 1 expert 3 (flat id 7).
ExpertPlan hand_plan() { return {kFingerprint, 2, 4, {{2, 3}, {3}}, ""}; }

RoutingTrace hand_trace() {
  RoutingTrace t{"hand.trace", {kFingerprint, 2, 4, 2, 0}, {}};
  t.steps.push_back({StepKind::Decode, {{0, 2}, {0, 1}}});
  t.steps.push_back({StepKind::Decode, {{2, 1}, {3, 0}}});
  t.steps.push_back({StepKind::Verify, {{2, 3, 3, 0}, {1, 3, 3, 2}}});
  t.steps.push_back({StepKind::Prefill, {{0, 1, 1, 0}, {0, 1, 1, 2}}});
  return t;
}

// One slot, counts halving every step, CPU expert 10 s, GPU expert 1 s.
//   step 0: L0 {0,2}: 2 misses (1 routing). L1 {0,1} on the GPU. Time max(10,1) + max(0,2) = 12.
//           After: 2 scores 1 and takes the free slot.
//   step 1: L0 {2,1}: 2 hits (1 routing). L1 {3,0}: 3 misses (1 routing). Time 2 + 10 = 12.
//           After: 2 -> 0.5 + 1 = 1.5, 7 -> 1; 1 is not above 1.5: no copy.
//   step 2: L0 {2,3,0}: 2 hits (1), 3 misses (2 routings). L1 {1,3,2}: 3 misses (2 routings).
//           Time max(10, 2) + max(10, 2) = 20. After: 2 -> 1.75, 7 -> 1.5, 3 -> 1: no copy.
//   step 3 (prefill): nothing CPU-homed. Time max(0,2) + max(0,3) = 5.
TEST(Simulator, HandWorkedTrace) {
  const SimulationReport r = simulate(hand_plan(), {hand_trace()}, 1, ExpertCosts(10, 1), {1.0, 16});
  const StepGroupReport& g = r.generation;
  EXPECT_EQ(g.steps, 3u);
  EXPECT_EQ(g.tokens, 4u);
  EXPECT_DOUBLE_EQ(g.cpu_routings.mean, 2.0);  // 1, 1, 4
  EXPECT_EQ(g.cpu_routings.p50, 1.0);
  EXPECT_EQ(g.cpu_routings.p90, 4.0);
  EXPECT_EQ(g.cpu_routings.p99, 4.0);
  EXPECT_DOUBLE_EQ(g.cpu_experts.mean, 4.0 / 3);  // 1, 1, 2
  EXPECT_EQ(g.zero_miss_steps, 0u);
  EXPECT_DOUBLE_EQ(g.step_seconds.mean, 44.0 / 3);  // 12, 12, 20
  EXPECT_EQ(g.step_seconds.p50, 12.0);
  EXPECT_EQ(g.step_seconds.p90, 20.0);

  EXPECT_EQ(r.prefill.steps, 1u);
  EXPECT_EQ(r.prefill.tokens, 2u);
  EXPECT_EQ(r.prefill.zero_miss_steps, 1u);
  EXPECT_DOUBLE_EQ(r.prefill.step_seconds.mean, 5.0);

  EXPECT_EQ(r.all.steps, 4u);
  EXPECT_EQ(r.all.tokens, 6u);
  EXPECT_EQ(r.all.zero_miss_steps, 1u);
  EXPECT_DOUBLE_EQ(r.all.zero_miss_fraction, 0.25);
  EXPECT_DOUBLE_EQ(r.all.step_seconds.mean, 49.0 / 4);

  EXPECT_EQ(r.cpu_homed_routings, 8u);  // 1 + 2 + 5
  EXPECT_EQ(r.cache_hit_routings, 2u);  // steps 1 and 2, expert 2 of layer 0
  EXPECT_DOUBLE_EQ(r.cache_hit_rate, 0.25);
  EXPECT_EQ(r.cache_fills, 1u);
}

// Without a cache every CPU-homed routing runs on the CPU; with all experts on the GPU none does.
TEST(Simulator, NoCacheAndNoCpuExperts) {
  const SimulationReport no_cache = simulate(hand_plan(), {hand_trace()}, 0, ExpertCosts(10, 1));
  EXPECT_EQ(no_cache.cache_hit_routings, 0u);
  EXPECT_DOUBLE_EQ(no_cache.generation.cpu_routings.mean, 8.0 / 3);  // 1, 2, 5
  EXPECT_EQ(no_cache.cache_fills, 0u);

  const ExpertPlan all_gpu{kFingerprint, 2, 4, {{}, {}}, ""};
  const SimulationReport r = simulate(all_gpu, {hand_trace()}, 0, ExpertCosts(10, 1));
  EXPECT_EQ(r.generation.zero_miss_steps, 3u);
  EXPECT_DOUBLE_EQ(r.generation.zero_miss_fraction, 1.0);
  EXPECT_EQ(r.cpu_homed_routings, 0u);
  EXPECT_EQ(r.cache_hit_rate, 0.0);
  EXPECT_DOUBLE_EQ(r.generation.step_seconds.mean, (4.0 + 4.0 + 6.0) / 3);  // distinct experts x 1 s
}

// The cache lives across traces, as in one server: replaying the trace twice, the second copy
// starts with expert 2 of layer 0 cached and so misses once less.
TEST(Simulator, CacheCarriesAcrossTraces) {
  const SimulationReport once = simulate(hand_plan(), {hand_trace()}, 1, ExpertCosts(10, 1), {1.0, 16});
  const SimulationReport twice = simulate(hand_plan(), {hand_trace(), hand_trace()}, 1, ExpertCosts(10, 1), {1.0, 16});
  EXPECT_EQ(twice.all.steps, 8u);
  EXPECT_EQ(twice.cache_hit_routings, 2 * once.cache_hit_routings + 1);
}

TEST(Simulator, RefusesTracesOfAnotherModel) {
  RoutingTrace other = hand_trace();
  other.header.model_fingerprint = "other/2x4/top2";
  try {
    simulate(hand_plan(), {other}, 1, ExpertCosts());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'hand.trace' is for model 'other/2x4/top2' but the plan is for 'm/2x4/top2'"));
  }
  ExpertPlan wide = hand_plan();
  wide.n_experts = 8;
  EXPECT_THROW(simulate(wide, {hand_trace()}, 1, ExpertCosts()), Error);
  EXPECT_THROW(simulate(hand_plan(), {}, 1, ExpertCosts()), Error);
}

TEST(Summary, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  const Summary s = summarize(v);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_EQ(s.p50, 50.0);
  EXPECT_EQ(s.p90, 90.0);
  EXPECT_EQ(s.p99, 99.0);
  EXPECT_EQ(summarize({7}).p99, 7.0);
  EXPECT_EQ(summarize({}).mean, 0.0);
}

}  // namespace
}  // namespace frank::experts
