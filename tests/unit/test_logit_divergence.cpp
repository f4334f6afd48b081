// logit_divergence (engine/logit_divergence.h) on rows whose KL is worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "frank/core/error.h"
#include "frank/engine/logit_divergence.h"

namespace frank::engine {
namespace {

TEST(LogitDivergence, HandWorkedRows) {
  // Row 0: p = softmax(0, 0) = (1/2, 1/2); q = softmax(log 3, 0) = (3/4, 1/4):
  //   KL = 1/2 log((1/2)/(3/4)) + 1/2 log((1/2)/(1/4)) = 1/2 (log 2/3 + log 2) = 1/2 log(4/3).
  //   Greedy: p's argmax is token 0 (the lower id of a tie), q's is token 0: they agree.
  // Row 1: equal rows shifted by a constant (same distribution): KL 0; argmax 1 both.
  // Row 2: p = softmax(log 3, 0) = (3/4, 1/4), q = (1/4, 3/4): KL = 3/4 log 3 + 1/4 log(1/3) = 1/2 log 3;
  //   argmax 0 vs 1: they part.
  const Tensor p({3, 2}, {0.f, 0.f, 1.f, 2.f, std::log(3.f), 0.f});
  const Tensor q({3, 2}, {std::log(3.f), 0.f, 11.f, 12.f, 0.f, std::log(3.f)});
  const LogitDivergence d = logit_divergence(p, q);
  EXPECT_EQ(d.positions, 3);
  const double row0 = 0.5 * std::log(4.0 / 3.0), row2 = 0.5 * std::log(3.0);
  // Logits are fp32 (log 3 rounded to 2^-23 relative): 1e-6 covers it.
  EXPECT_NEAR(d.mean_kl, (row0 + row2) / 3, 1e-6);
  EXPECT_NEAR(d.max_kl, row2, 1e-6);
  EXPECT_EQ(d.greedy_agree, 2);
}

TEST(LogitDivergence, ShapesMustMatch) {
  EXPECT_THROW(logit_divergence(Tensor({2, 3}), Tensor({3, 2})), Error);
}

}  // namespace
}  // namespace frank::engine
