// The synthetic trace generator: calibrated skew (the hottest 19% of experts receive 96% of
// routings), persistence above chance, workloads with controlled overlap, the step mix, and
// determinism.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>

#include "frank/core/error.h"
#include "frank/experts/popularity_calibration.h"
#include "frank/experts/trace_generator.h"
#include "frank/experts/usage_counts.h"

namespace frank::experts {
namespace {

using ::testing::HasSubstr;

// V4-Flash's layer shape (256 experts, top-6) with fewer layers, to keep the test quick.
GeneratorParams eight_layers() {
  GeneratorParams p;
  p.n_layers = 8;
  return p;
}

// Share of routings that the hottest `fraction` of the counted experts receive.
double hottest_fraction_share(std::vector<uint64_t> routings, double fraction) {
  std::sort(routings.begin(), routings.end(), std::greater<>());
  const auto hot = static_cast<size_t>(std::llround(fraction * static_cast<double>(routings.size())));
  const double total = std::accumulate(routings.begin(), routings.end(), 0.0);
  return std::accumulate(routings.begin(), routings.begin() + static_cast<std::ptrdiff_t>(hot), 0.0) / total;
}

// Of decode tokens that follow another token, the fraction of picks the previous token also made.
double repeat_rate(const RoutingTrace& t) {
  const uint32_t k = t.header.top_k;
  double repeats = 0, picks = 0;
  for (size_t i = 1; i < t.steps.size(); ++i) {
    if (t.steps[i].kind != StepKind::Decode) continue;
    for (size_t l = 0; l < t.header.n_layers; ++l) {
      const auto& now = t.steps[i].layers[l];
      const auto& before = t.steps[i - 1].layers[l];
      for (uint32_t j = 0; j < k; ++j, ++picks)
        repeats += std::find(before.end() - k, before.end(), now[j]) != before.end();
    }
  }
  return repeats / picks;
}

TEST(Calibration, InclusionProbabilitiesSumToTopK) {
  const auto pi = inclusion_probabilities(zipf_weights(256, 2.0, 0.0), 6);
  EXPECT_NEAR(std::accumulate(pi.begin(), pi.end(), 0.0), 6.0, 1e-9);
  EXPECT_TRUE(std::is_sorted(pi.begin(), pi.end(), std::greater<>()));
  for (double p : inclusion_probabilities(std::vector<double>(8, 1.0), 2)) EXPECT_NEAR(p, 0.25, 1e-12);
}

TEST(Calibration, UniformWeightsGiveTheProportionalShare) {
  RankingMix mix;
  mix.rank_of.push_back(std::vector<uint32_t>(64));
  std::iota(mix.rank_of[0].begin(), mix.rank_of[0].end(), 0u);
  mix.weight = {1.0};
  EXPECT_NEAR(hottest_share(mix, 4, 0.0, 0.0, 16.0), 0.25, 1e-9);
  EXPECT_NEAR(hottest_share(mix, 4, calibrate_exponent(mix, 4, 0.0, 16.0, 0.9), 0.0, 16.0), 0.9, 1e-6);
  EXPECT_THROW(calibrate_exponent(mix, 4, 0.0, 16.0, 0.1), Error);  // below the uniform share
}

// The calibration target, measured on the routings the generator actually makes. With one phase
// and no prefill shift each layer follows a single ranking, so the per-layer share is exact up to
// Rosen's approximation and sampling noise.
TEST(TraceGenerator, HottestExpertsOfEachLayerReceiveTheirCalibratedShare) {
  GeneratorParams p = eight_layers();
  p.phases = 1;
  p.prefill_shift = 0;
  const RoutingTrace t = generate_trace(p, 2000);
  const UsageCounts counts = count_usage({t});
  const WorkloadModel model(p);
  for (uint32_t l = 0; l < p.n_layers; ++l) {
    const std::vector<uint64_t> layer(counts.routings.begin() + l * 256, counts.routings.begin() + (l + 1) * 256);
    EXPECT_NEAR(hottest_fraction_share(layer, model.hot_count(l) / 256), 0.96, 0.006) << "layer " << l;
  }
}

// The headline calibration with every default on (phases, prefill shift, persistence): the hottest
// 19% of all (layer, expert) pairs receive ~96% of routings (vLLM-Moet on DeepSeek-V4-Flash).
TEST(TraceGenerator, HottestNineteenPercentReceiveNinetySixPercent) {
  const RoutingTrace t = generate_trace(eight_layers(), 4000);
  const double share = hottest_fraction_share(count_usage({t}).routings, 0.19);
  EXPECT_NEAR(share, 0.96, 0.01);
  // Not a property of any skewed traffic: the hottest 10% receive clearly less.
  EXPECT_LT(hottest_fraction_share(count_usage({t}).routings, 0.10), 0.90);
}

TEST(TraceGenerator, DepthGradientSizesTheHotSets) {
  const WorkloadModel model(GeneratorParams{});
  EXPECT_NEAR(model.hot_count(0) / model.hot_count(42), 1.6, 1e-9);
  double mean = 0;
  for (uint32_t l = 0; l < 43; ++l) mean += model.hot_count(l) / 43;
  EXPECT_NEAR(mean, 0.19 * 256, 1e-9);
}

TEST(TraceGenerator, ConsecutiveTokensShareExpertsMoreOftenThanChance) {
  GeneratorParams p = eight_layers();
  p.persistence = 0;
  const double chance = repeat_rate(generate_trace(p, 1500));
  p.persistence = 0.3;
  const double persistent = repeat_rate(generate_trace(p, 1500));
  // Each pick repeats with probability 0.3, else matches at most by chance (a fresh draw cannot
  // return an expert already picked): below 0.3 + 0.7 * chance, and well above chance.
  EXPECT_GT(persistent, chance + 0.1);
  EXPECT_LT(persistent, 0.3 + 0.7 * chance + 0.01);
}

TEST(TraceGenerator, WorkloadsShareTheConfiguredPartOfTheirHotSets) {
  auto hot_set = [](const WorkloadModel& m, uint32_t l) {
    const auto& r = m.ranking(l);
    return std::set<uint16_t>(r.begin(), r.begin() + std::lround(m.hot_count(l)));
  };
  for (double overlap : {1.0, 0.5}) {
    GeneratorParams a = eight_layers();
    a.overlap = overlap;
    GeneratorParams b = a;
    b.workload = "agent-b";
    const WorkloadModel model_a(a), model_b(b);
    for (uint32_t l = 0; l < a.n_layers; ++l) {
      const auto ha = hot_set(model_a, l), hb = hot_set(model_b, l);
      std::vector<uint16_t> both;
      std::set_intersection(ha.begin(), ha.end(), hb.begin(), hb.end(), std::back_inserter(both));
      if (overlap == 1.0) {
        EXPECT_EQ(both.size(), ha.size()) << "layer " << l;
      } else {  // the common half, plus what chance adds
        EXPECT_GE(both.size(), static_cast<size_t>(std::lround(overlap * static_cast<double>(ha.size()))));
        EXPECT_LT(both.size(), ha.size());
      }
    }
  }
}

TEST(TraceGenerator, HeaderAndStepMix) {
  GeneratorParams p = eight_layers();
  p.prefill_mean_tokens = 300;
  p.prefill_chunk_tokens = 128;
  p.decode_mean_tokens = 40;
  const RoutingTrace t = generate_trace(p, 400);
  EXPECT_EQ(t.header.model_fingerprint, "deepseek_v4/8x256/top6");
  EXPECT_EQ(t.header.flags, kTraceFlagSynthetic);
  size_t by_kind[kStepKindCount] = {};
  for (const auto& step : t.steps) {
    ++by_kind[static_cast<size_t>(step.kind)];
    const size_t tokens = step.layers[0].size() / 6;
    for (const auto& layer : step.layers) EXPECT_EQ(layer.size(), tokens * 6);
    const size_t most = step.kind == StepKind::Decode ? 1 : step.kind == StepKind::Verify ? 3 : 128;
    EXPECT_TRUE(tokens >= 1 && tokens <= most) << step_kind_name(step.kind) << " step of " << tokens << " tokens";
  }
  EXPECT_GT(by_kind[0], 50u);
  EXPECT_GT(by_kind[1], 50u);
  EXPECT_GT(by_kind[2], 5u);
}

TEST(TraceGenerator, DeterministicFromWorkloadAndSeed) {
  GeneratorParams p = eight_layers();
  auto layers_of = [](const RoutingTrace& t) {
    std::vector<std::vector<std::vector<uint16_t>>> v;
    for (const auto& s : t.steps) v.push_back(s.layers);
    return v;
  };
  const auto first = layers_of(generate_trace(p, 200));
  EXPECT_EQ(first, layers_of(generate_trace(p, 200)));
  p.seed = 2;
  EXPECT_NE(first, layers_of(generate_trace(p, 200)));
}

TEST(TraceGenerator, RefusesBadParameters) {
  auto expect_refused = [](GeneratorParams p, const char* name) {
    try {
      TraceGenerator g(p);
      FAIL() << "expected an error about " << name;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(name));
    }
  };
  GeneratorParams p;
  p.persistence = 1.0;
  expect_refused(p, "persistence");
  p = {};
  p.hot_share = 0.1;  // below what uniform traffic already gives the hottest 19%
  expect_refused(p, "cannot calibrate");
  p = {};
  p.top_k = 256;
  expect_refused(p, "top_k");
  p = {};
  p.depth_gradient = 40;  // the last layer's hot set would be smaller than top_k
  expect_refused(p, "hot set");
}

}  // namespace
}  // namespace frank::experts
