// The delicate ops on small cases worked out by hand (the transformers-captured versions of the
// same ops are in tests/golden/test_ops_golden.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "frank/engine/compressor.h"
#include "frank/engine/hyper_connection.h"
#include "frank/engine/indexer.h"
#include "frank/engine/moe.h"
#include "frank/engine/rope.h"

namespace frank::engine {
namespace {

using ::testing::ElementsAre;
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(TopK, HigherScoreFirstAndLowerIndexWinsTies) {
  const std::vector<float> s{1, 3, 3, 2, 3};
  EXPECT_THAT(top_k_indices(s, 2), ElementsAre(1, 2));
  EXPECT_THAT(top_k_indices(s, 3), ElementsAre(1, 2, 4));
  EXPECT_THAT(top_k_indices(s, 4), ElementsAre(1, 2, 4, 3));
  EXPECT_THAT(top_k_indices(s, 99), ElementsAre(1, 2, 4, 3, 0));  // k clamps to the row
  EXPECT_TRUE(tie_at_kth(s, 2));
  EXPECT_FALSE(tie_at_kth(s, 3));
}

TEST(TopK, SignedZerosAreEqualAndInvisibleEntriesNeverChosen) {
  // ReLU scores are often exactly 0; -0.0 and +0.0 tie, so the lower index wins.
  EXPECT_THAT(top_k_indices({0.0f, -0.0f, 0.0f}, 2), ElementsAre(0, 1));
  EXPECT_THAT(top_k_indices({-0.0f, 0.0f}, 1), ElementsAre(0));
  // Masked (-inf) and NaN entries are dropped even when k asks for more.
  EXPECT_THAT(top_k_indices({-kInf, 2.0f, NAN, -5.0f, -kInf}, 4), ElementsAre(1, 3));
  // Subnormals order like any number.
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_THAT(top_k_indices({tiny, 2 * tiny, 0.0f, -tiny}, 4), ElementsAre(1, 0, 2, 3));
  EXPECT_TRUE(top_k_indices({}, 3).empty());
}

TEST(IndexerScores, ReluWeightedSumOverHeads) {
  // Two heads of dim 4: score = sum_h w_h * relu(q_h . k) / sqrt(4).
  const std::vector<float> q{1, 0, 0, 0, /*head 1*/ 0, 1, 0, 0};
  const std::vector<float> w{2.0f, 10.0f};
  const std::vector<float> keys{3, -1, 0, 0, /*key 1*/ -3, 4, 0, 0};
  const auto s = indexer_scores(q.data(), w.data(), 2, 4, keys.data(), 2);
  // key 0: h0 relu(3)=3 -> 2*3/2 = 3; h1 relu(-1)=0.  key 1: h0 relu(-3)=0; h1 relu(4)=4 -> 10*4/2 = 20.
  EXPECT_FLOAT_EQ(s[0], 3.0f);
  EXPECT_FLOAT_EQ(s[1], 20.0f);
}

TEST(Sinkhorn, UniformLogitsStayUniformAndResultIsDoublyStochastic) {
  std::vector<float> c(16, 0.0f);
  sinkhorn(c.data(), 4, 20, 1e-6f);
  for (float v : c) EXPECT_NEAR(v, 0.25f, 1e-6f);
  std::vector<float> r{3, -1, 0.5f, 2, 0, 0, 1, -2, 4, 1, 1, 1, -3, 2, 0, 0.25f};
  sinkhorn(r.data(), 4, 20, 1e-6f);
  for (int i = 0; i < 4; ++i) {
    float row = 0, col = 0;
    for (int j = 0; j < 4; ++j) row += r[i * 4 + j], col += r[j * 4 + i];
    EXPECT_NEAR(col, 1.0f, 1e-5f) << "column " << i;  // ends on a column normalisation
    EXPECT_NEAR(row, 1.0f, 2e-3f) << "row " << i;
  }
}

TEST(HyperConnection, ExpandUsesCombTransposed) {
  // X'_k = post_k * F + sum_j comb[j][k] X_j with a non-symmetric comb.
  HyperConnectionMix mix{{0, 0}, {1.0f, 0.5f}, {0.0f, 1.0f, 1.0f, 0.0f}};
  mix.comb = {0.75f, 0.25f, 0.25f, 0.75f};
  std::vector<float> streams{2.0f, 4.0f};  // two streams of width 1
  const float f = 8.0f;
  hc_expand(mix, &f, 1, streams.data());
  EXPECT_FLOAT_EQ(streams[0], 1.0f * 8 + 0.75f * 2 + 0.25f * 4);
  EXPECT_FLOAT_EQ(streams[1], 0.5f * 8 + 0.25f * 2 + 0.75f * 4);
}

TEST(Rope, RotatesTrailingPairsAndInverseUndoes) {
  const RopeTable rope(model::RopeSpec{10000.0}, 4);
  EXPECT_FLOAT_EQ(rope.inv_freq()[0], 1.0f);
  EXPECT_FLOAT_EQ(rope.inv_freq()[1], 0.01f);  // 1 / 10000^(2/4)
  std::vector<float> x{7, 1, 0, 1, 0};  // head of 5: first dim untouched, last 4 rotated in pairs
  rope.apply(x.data(), 5, 3);
  EXPECT_FLOAT_EQ(x[0], 7.0f);
  EXPECT_FLOAT_EQ(x[1], std::cos(3.0f));
  EXPECT_FLOAT_EQ(x[2], std::sin(3.0f));
  EXPECT_FLOAT_EQ(x[3], std::cos(0.03f));
  EXPECT_FLOAT_EQ(x[4], std::sin(0.03f));
  rope.apply(x.data(), 5, 3, /*inverse=*/true);
  EXPECT_NEAR(x[1], 1.0f, 1e-6f);
  EXPECT_NEAR(x[2], 0.0f, 1e-6f);
}

TEST(Rope, YarnBlendsInterpolatedAndExtrapolatedFrequencies) {
  // V4 numbers: theta 160000, factor 16, original 65536, beta 32/1 on 64 dims -> ramp over pairs 15..25.
  const RopeTable yarn(model::RopeSpec{160000.0, true, 16.0, 65536, 32.0, 1.0}, 64);
  const RopeTable plain(model::RopeSpec{160000.0}, 64);
  for (int i = 0; i <= 15; ++i) EXPECT_FLOAT_EQ(yarn.inv_freq()[i], plain.inv_freq()[i]) << i;  // extrapolated
  for (int i = 25; i < 32; ++i) EXPECT_FLOAT_EQ(yarn.inv_freq()[i], plain.inv_freq()[i] / 16) << i;  // interpolated
  const float ramp = (20.0f - 15.0f) / 10.0f;  // pair 20: halfway
  EXPECT_NEAR(yarn.inv_freq()[20], plain.inv_freq()[20] * (1 - ramp) + plain.inv_freq()[20] / 16 * ramp, 1e-12);
}

// A compressor of width 2 whose RoPE touches nothing at position 0 (entry 0 is roped at 0).
struct SmallCompressor {
  model::CompressorWeights w;
  RopeTable rope{model::RopeSpec{10000.0}, 2};
  SmallCompressor(int ratio, int halves, std::vector<float> bias) {
    w.position_bias = Tensor({ratio, 2 * halves}, std::move(bias));
    w.norm = Tensor({2}, {1.0f, 1.0f});
  }
};

TEST(Compressor, HeavyPoolsItsWindowWithGateSoftmax) {
  // ratio 2, one half: gates (0 + 0, ln3 + 0) per channel -> weights 1/4, 3/4.
  SmallCompressor c(2, 1, {0, 0, 0, 0});
  Compressor comp(c.w, 2, 2, false, 1e-6f, c.rope);
  CompressorState s;
  const float kv0[2] = {4, 8}, g0[2] = {0, 0}, kv1[2] = {8, 0}, g1[2] = {std::log(3.0f), std::log(3.0f)};
  EXPECT_FALSE(comp.push(s, kv0, g0));
  EXPECT_TRUE(comp.push(s, kv1, g1));
  // pooled = (0.25*4 + 0.75*8, 0.25*8 + 0) = (7, 2); RMSNorm: / sqrt((49+4)/2 + eps).
  const float inv = 1.0f / std::sqrt(26.5f + 1e-6f);
  EXPECT_NEAR(s.entries[0], 7 * inv, 1e-6f);
  EXPECT_NEAR(s.entries[1], 2 * inv, 1e-6f);
  EXPECT_EQ(s.pending, 0);
}

TEST(Compressor, OverlappingFirstWindowIgnoresMissingPreviousHalf) {
  // ratio 2, two halves [Ca | Cb]: window 0 pools only Cb of its own tokens (Ca slots: weight 0).
  SmallCompressor c(2, 2, std::vector<float>(8, 0.0f));
  Compressor comp(c.w, 2, 2, true, 1e-6f, c.rope);
  CompressorState s;
  const float kv0[4] = {6, 2, 1, 3}, kv1[4] = {6, 2, 3, 1}, zero_gate[4] = {0, 0, 0, 0};
  comp.push(s, kv0, zero_gate);
  ASSERT_TRUE(comp.push(s, kv1, zero_gate));
  // Equal gates on the two Cb slots -> mean (2, 2); normalised -> (1, 1) up to eps.
  EXPECT_NEAR(s.entries[0], 1.0f, 1e-6f);
  EXPECT_NEAR(s.entries[1], 1.0f, 1e-6f);
  // The Ca half of window 0 (gates with their position bias) is kept for window 1.
  ASSERT_TRUE(s.has_overlap);
  EXPECT_THAT(s.overlap_kv, ElementsAre(6, 2, 6, 2));
  // Window 1 pools 4 slots with equal gates: Ca (6, 2) twice and Cb (2, 6) twice -> mean (4, 4),
  // normalised (1, 1), then RoPE at position 1 * ratio = 2 (angle 2 for the single pair).
  const float kv2[4] = {0, 0, 2, 6};
  comp.push(s, kv2, zero_gate);
  ASSERT_TRUE(comp.push(s, kv2, zero_gate));
  ASSERT_EQ(s.n_entries, 2);
  EXPECT_NEAR(s.entries[2], std::cos(2.0f) - std::sin(2.0f), 1e-6f);
  EXPECT_NEAR(s.entries[3], std::sin(2.0f) + std::cos(2.0f), 1e-6f);
}

TEST(SwiGlu, GateClampedAboveOnlyUpClampedBothWays) {
  // hidden 2, intermediate 1: gate reads x0, up reads x1, down copies.
  model::ExpertWeights e{Tensor({1, 2}, {1, 0}), Tensor({1, 2}, {0, 1}), Tensor({1, 1}, {1})};
  auto run = [&](float x0, float x1) {
    const float x[2] = {x0, x1};
    float out = 0;
    swiglu_expert(e, 10.0f, x, &out);
    return out;
  };
  const float silu10 = 10.0f / (1.0f + std::exp(-10.0f));
  EXPECT_FLOAT_EQ(run(20, -15), silu10 * -10);  // gate 20 -> 10, up -15 -> -10
  EXPECT_FLOAT_EQ(run(20, 15), silu10 * 10);    // up 15 -> 10
  EXPECT_FLOAT_EQ(run(-20, 3), -20.0f / (1.0f + std::exp(20.0f)) * 3);  // no lower clamp on gate
  EXPECT_FLOAT_EQ(run(2, 3), 2.0f / (1.0f + std::exp(-2.0f)) * 3);
}

TEST(Router, BiasChoosesButDoesNotWeigh) {
  model::ModelConfig c;
  c.n_routed_experts = 3;
  c.experts_per_token = 2;
  c.routed_scaling_factor = 1.5f;
  model::MoeWeights w;
  w.router = Tensor({3, 1}, {1.0f, 2.0f, 3.0f});  // logits = (x, 2x, 3x)
  w.selection_bias = Tensor({3}, {5.0f, 0.0f, 0.0f});
  const float x = 1.0f;
  const Routing r = route(c, w, false, &x, 0);
  // Biased scores pick experts 0 and 2; weights come from the unbiased sqrt(softplus) scores.
  ASSERT_THAT(r.experts, ElementsAre(0, 2));
  const float s0 = std::sqrt(std::log1p(std::exp(1.0f))), s2 = std::sqrt(std::log1p(std::exp(3.0f)));
  EXPECT_NEAR(r.weights[0], s0 / (s0 + s2) * 1.5f, 1e-6f);
  EXPECT_NEAR(r.weights[1], s2 / (s0 + s2) * 1.5f, 1e-6f);
}

TEST(Router, HashLayerTakesExpertsFromTheTable) {
  model::ModelConfig c;
  c.n_routed_experts = 3;
  c.experts_per_token = 2;
  c.routed_scaling_factor = 1.0f;
  model::MoeWeights w;
  w.router = Tensor({3, 1}, {1.0f, 2.0f, 3.0f});
  w.tid2eid = {0, 1, /*token 1*/ 2, 0};
  const float x = 30.0f;  // softplus above its threshold of 20 is the identity
  const Routing r = route(c, w, true, &x, 1);
  ASSERT_THAT(r.experts, ElementsAre(2, 0));
  const float s2 = std::sqrt(90.0f), s0 = std::sqrt(30.0f);
  EXPECT_NEAR(r.weights[0], s2 / (s0 + s2), 1e-6f);
}

}  // namespace
}  // namespace frank::engine
