// Distribution functions against scipy (t.ppf, t.cdf, norm.ppf, betainc, binom.sf in the
// fixture) and against closed forms worked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "frank/lab/distributions.h"
#include "lab_test_util.h"

namespace frank::lab {
namespace {

// Relative agreement, with an absolute floor for values near 0.
void expect_close(double got, double want, double rel, const std::string& what) {
  EXPECT_LE(std::abs(got - want), rel * std::max(1e-300, std::abs(want)) + 1e-15)
      << what << ": got " << got << ", scipy " << want;
}

TEST(LabDistributions, StudentTQuantilesMatchScipy) {
  const auto cases = test::lab_fixture("distributions.json").at("t_ppf");
  for (const auto& c : cases) {
    const double p = c.at("p"), df = c.at("df"), want = c.at("value");
    expect_close(student_t_quantile(p, df), want, 1e-10, fmt::format("t.ppf({}, {})", p, df));
  }
}

TEST(LabDistributions, StudentTCdfMatchesScipy) {
  for (const auto& c : test::lab_fixture("distributions.json").at("t_cdf")) {
    const double t = c.at("t"), df = c.at("df"), want = c.at("value");
    expect_close(student_t_cdf(t, df), want, 1e-12, fmt::format("t.cdf({}, {})", t, df));
  }
}

TEST(LabDistributions, NormalQuantilesMatchScipy) {
  for (const auto& c : test::lab_fixture("distributions.json").at("norm_ppf")) {
    const double p = c.at("p"), want = c.at("value");
    expect_close(normal_quantile(p), want, 1e-12, fmt::format("norm.ppf({})", p));
  }
}

TEST(LabDistributions, IncompleteBetaMatchesScipy) {
  for (const auto& c : test::lab_fixture("distributions.json").at("betainc")) {
    const double a = c.at("a"), b = c.at("b"), x = c.at("x"), want = c.at("value");
    expect_close(regularized_incomplete_beta(a, b, x), want, 1e-11, fmt::format("betainc({}, {}, {})", a, b, x));
  }
}

TEST(LabDistributions, BinomialTailMatchesScipy) {
  for (const auto& c : test::lab_fixture("distributions.json").at("binomial_half_sf")) {
    const int64_t n = c.at("n"), k = c.at("k");
    expect_close(binomial_half_upper_tail(n, k), c.at("value"), 1e-12, fmt::format("P(Bin({}, 1/2) >= {})", n, k));
  }
}

TEST(LabDistributions, ClosedFormsByHand) {
  // df = 1 is the Cauchy distribution: quantile tan(pi (p - 1/2)).
  for (double p : {0.01, 0.3, 0.9, 0.975})
    expect_close(student_t_quantile(p, 1), std::tan(std::numbers::pi * (p - 0.5)), 1e-12, "Cauchy");
  // df = 2: quantile (2p - 1) / sqrt(2 p (1 - p)).
  for (double p : {0.05, 0.6, 0.99})
    expect_close(student_t_quantile(p, 2), (2 * p - 1) / std::sqrt(2 * p * (1 - p)), 1e-12, "df 2");
  EXPECT_EQ(student_t_quantile(0.5, 7), 0.0);
  EXPECT_EQ(student_t_cdf(0.0, 3), 0.5);
  // I_x(1, 1) = x, I_x(a, 1) = x^a.
  expect_close(regularized_incomplete_beta(1, 1, 0.3), 0.3, 1e-14, "uniform");
  expect_close(regularized_incomplete_beta(3, 1, 0.5), 0.125, 1e-14, "x^3");
  // Sign-test tails: 3 of 3 -> 1/8; at least 4 of 5 -> 6/32.
  EXPECT_EQ(binomial_half_upper_tail(3, 3), 0.125);
  EXPECT_EQ(binomial_half_upper_tail(5, 4), 6.0 / 32);
  EXPECT_EQ(binomial_half_upper_tail(5, 0), 1.0);
  EXPECT_EQ(binomial_half_upper_tail(5, 6), 0.0);
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-14);
}

}  // namespace
}  // namespace frank::lab
