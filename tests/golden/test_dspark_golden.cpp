// V4.1's DSpark drafter on the CPU reference against tools/reference/make_dspark_fixture.py, which wires
// it from transformers' own DeepSeek-V4.1 modules (tests/fixtures/dsv41-dspark/tiny-v41-dspark).
//
// Tolerances. Features and logits: |frank - reference| <= 1e-4 * max(1, |value|), the V4.1 golden
// tests' bound (test_golden_v41.cpp): both sides compute in fp32 from the same fp32 weights and
// differ only in summation order and transcendental last bits (the fixture's float64
// re-implementation differs from it by 6.3e-6 on the logits); the FP8 rounding of the window K=V
// is reproduced bit for bit. A wrong window edge, a dropped sink or a missing Markov term moves
// logits by far more (the fixture script fails on the first two at 1e-4). Drafts: identical; the
// fixture's smallest relative top-1 lead is 2.2e-3, twenty times the logit tolerance, so no
// in-tolerance error can flip an argmax. Confidence: 1e-5 absolute (the float64 re-implementation is
// within 2.5e-7 of it; sigmoid's slope is at most 1/4).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "dspark_fixture.h"
#include "frank/engine/dspark.h"
#include "frank/engine/v41_model.h"

namespace frank::engine {
namespace {

using test::max_scaled_diff;

constexpr double kRelTolerance = 1e-4;
constexpr double kConfidenceTolerance = 1e-5;

Tensor features_of(const V41Model& model, std::span<const int32_t> ids, int64_t chunk) {
  V41Session session = model.new_session();
  Tensor all;
  for (size_t begin = 0; begin < ids.size(); begin += chunk) {
    Tensor part;
    model.forward(session, ids.subspan(begin, std::min<size_t>(chunk, ids.size() - begin)), Model::Logits::All, &part);
    all.shape = {all.rows() + part.rows(), part.cols()};
    all.data.insert(all.data.end(), part.data.begin(), part.data.end());
  }
  return all;
}

// Features read one shot, in chunks of 5 and one token at a time all equal the fixture's; reading
// them changes no logit.
TEST(DSparkGolden, TargetFeaturesMatchTheReference) {
  const test::DSparkGolden g = test::dspark_golden_data();
  const V41Model model(test::load_dspark_fixture_model());
  const auto want = test::read_dspark_file<float>("features.f32", g.ids.size() * g.width);
  for (int64_t chunk : {static_cast<int64_t>(g.ids.size()), int64_t{5}, int64_t{1}}) {
    const Tensor got = features_of(model, g.ids, chunk);
    ASSERT_EQ(got.rows(), static_cast<int64_t>(g.ids.size()));
    ASSERT_EQ(got.cols(), g.width);
    const double diff = max_scaled_diff(got.data, want);
    std::cout << fmt::format("[dspark] features, chunks of {}: max scaled diff {:.3g}\n", chunk, diff);
    EXPECT_LE(diff, kRelTolerance) << "chunks of " << chunk;
  }
  V41Session plain = model.new_session(), tapped = model.new_session();
  Tensor features;
  const Tensor a = model.forward(plain, g.ids), b = model.forward(tapped, g.ids, Model::Logits::All, &features);
  EXPECT_EQ(a.data, b.data);
}

// The drafter at every anchor p of the fixture: the context rings filled with positions 0..p (fed
// in pieces up to each anchor), the block [ids[p+1], noise x4], its chained drafts.
void check_drafts(const char* what, const V41Model& model, const Tensor& features) {
  const test::DSparkGolden g = test::dspark_golden_data();
  const DSpark dspark(model);
  const int B = dspark.config().block_size;
  const size_t A = g.anchors.size();
  const auto want_logits = test::read_dspark_file<float>("draft_logits.f32", A * B * g.vocab);
  const auto want_drafts = test::read_dspark_file<int32_t>("drafts.i32", A * B);
  const auto want_conf = test::read_dspark_file<float>("confidence.f32", A * B);
  DSparkState state = dspark.new_state();
  double logit_diff = 0.0, conf_diff = 0.0;
  for (size_t a = 0; a < A; ++a) {
    const int p = g.anchors[a];
    const int64_t n = p + 1 - state.position;
    dspark.observe(state, Tensor({n, g.width}, std::vector<float>(features.row(state.position),
                                                                  features.row(state.position) + n * g.width)));
    const DSparkDraft d = dspark.draft(state, g.ids[p + 1]);
    const std::span<const float> wl(want_logits.data() + a * B * g.vocab, B * g.vocab);
    logit_diff = std::max(logit_diff, max_scaled_diff(d.logits.data, wl));
    EXPECT_EQ(d.tokens, std::vector<int32_t>(want_drafts.begin() + a * B, want_drafts.begin() + (a + 1) * B))
        << what << ": anchor " << p;
    for (int j = 0; j < B; ++j) conf_diff = std::max(conf_diff, double{std::abs(d.confidence[j] - want_conf[a * B + j])});
  }
  std::cout << fmt::format("[dspark] {}: {} anchors, logits max scaled diff {:.3g}, confidence max diff {:.3g}\n",
                           what, A, logit_diff, conf_diff);
  EXPECT_LE(logit_diff, kRelTolerance) << what;
  EXPECT_LE(conf_diff, kConfidenceTolerance) << what;
}

// From the fixture's own features: the drafter alone.
TEST(DSparkGolden, DraftsFromReferenceFeaturesMatch) {
  const test::DSparkGolden g = test::dspark_golden_data();
  const V41Model model(test::load_dspark_fixture_model());
  const auto f = test::read_dspark_file<float>("features.f32", g.ids.size() * g.width);
  check_drafts("reference features", model, Tensor({static_cast<int64_t>(g.ids.size()), g.width}, f));
}

// End to end: the features frank's target computes, one token at a time.
TEST(DSparkGolden, DraftsFromEngineFeaturesMatch) {
  const test::DSparkGolden g = test::dspark_golden_data();
  const V41Model model(test::load_dspark_fixture_model());
  check_drafts("engine features", model, features_of(model, g.ids, 1));
}

}  // namespace
}  // namespace frank::engine
