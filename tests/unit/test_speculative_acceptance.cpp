// The acceptance rule of speculative sampling (engine/speculative.h) preserves the target
// distribution: the token emitted after a verify step's first position is distributed as the
// model's p whatever the drafter's q. Checked by Pearson's chi-square over 200,000 seeded steps
// against scipy's critical value at 1e-6 (tests/fixtures/speculative/chi2.json), for several q;
// and the test is shown to have power: accepting every draft instead fails it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "frank/core/error.h"
#include "frank/engine/speculative.h"

namespace frank::engine {
namespace {

double critical_value(int df) {
  std::ifstream in(std::string(FRANK_FIXTURE_DIR) + "/speculative/chi2.json");
  return nlohmann::json::parse(in).at("critical").at(std::to_string(df)).get<double>();
}

// Pearson's statistic of `counts` against the probabilities `p` (cells with p = 0 must be empty).
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p, int64_t n) {
  double x = 0;
  for (size_t v = 0; v < p.size(); ++v) {
    if (p[v] == 0.0) {
      EXPECT_EQ(counts[v], 0) << "token " << v << " has probability 0";
      continue;
    }
    const double expected = p[v] * static_cast<double>(n);
    x += (static_cast<double>(counts[v]) - expected) * (static_cast<double>(counts[v]) - expected) / expected;
  }
  return x;
}

const std::vector<double> kP1 = {0.40, 0.25, 0.20, 0.10, 0.05};  // the model at the first draft
const std::vector<double> kP2 = {0.10, 0.10, 0.30, 0.30, 0.20};  // after it

// The first token after `next`: the accepted draft, or a draw from the distribution accept_drafts
// returns at a rejection.
std::vector<int64_t> first_token_counts(const std::vector<double>& q, int64_t trials, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> counts(kP1.size(), 0);
  for (int64_t i = 0; i < trials; ++i) {
    const Draft d{draw_token(q, rng), q};
    const Acceptance a = accept_drafts({kP1, kP2}, {d}, rng);
    ++counts[static_cast<size_t>(a.accepted == 1 ? d.token : draw_token(a.next, rng))];
  }
  return counts;
}

TEST(SpeculativeAcceptance, EmittedTokensFollowTheTargetDistribution) {
  const int64_t trials = 200000;
  const double limit = critical_value(4);
  const std::vector<std::vector<double>> drafters = {
      {0.2, 0.2, 0.2, 0.2, 0.2},   // uniform
      {0.05, 0.05, 0.1, 0.3, 0.5},  // favours what the model does not
      {0.4, 0.25, 0.2, 0.1, 0.05},  // exactly the model
      {0.0, 0.0, 1.0, 0.0, 0.0},    // deterministic, one-hot
      {0.7, 0.3, 0.0, 0.0, 0.0},    // misses part of the support
  };
  uint64_t seed = 1;
  for (const auto& q : drafters) {
    const double x = chi_square(first_token_counts(q, trials, seed++), kP1, trials);
    EXPECT_LT(x, limit) << "q = " << q[0] << "," << q[1] << "," << q[2] << "," << q[3] << "," << q[4];
  }
}

TEST(SpeculativeAcceptance, TheTestDetectsABiasedRule) {
  // Accepting every draft emits q, not p: the same statistic must reject it.
  const std::vector<double> q = {0.2, 0.2, 0.2, 0.2, 0.2};
  std::mt19937_64 rng(7);
  std::vector<int64_t> counts(5, 0);
  for (int i = 0; i < 200000; ++i) ++counts[static_cast<size_t>(draw_token(q, rng))];
  EXPECT_GT(chi_square(counts, kP1, 200000), critical_value(4));
}

TEST(SpeculativeAcceptance, GreedyIsExactAndDeterministic) {
  // p one-hot at 2: a draft is kept iff it is 2; after a rejection the next token is 2.
  const std::vector<double> p = {0, 0, 1, 0, 0};
  std::mt19937_64 rng(3);
  EXPECT_EQ(accept_drafts({p, p, p}, {{2, {}}, {2, {}}}, rng).accepted, 2);
  const Acceptance rejected = accept_drafts({p, p, p}, {{2, {}}, {4, {}}}, rng);
  EXPECT_EQ(rejected.accepted, 1);
  EXPECT_EQ(rejected.next, p);
  EXPECT_THROW(accept_drafts({p}, {{2, {}}}, rng), Error);  // one target per draft plus one
}

}  // namespace
}  // namespace frank::engine
