// --draft-tokens auto (engine/draft_length.h): tries every k, then follows tokens per second.
#include <gtest/gtest.h>

#include <algorithm>

#include "frank/core/error.h"
#include "frank/engine/draft_length.h"

namespace frank::engine {
namespace {

// A simulated engine: a step costs base + per_token * (k + 1) seconds; each draft is accepted with
// probability `accept` (deterministically: a fixed pattern at that rate).
int run(DraftLengthChooser& chooser, double base, double per_token, double accept, int steps) {
  int last = 0;
  double credit = 0.0;
  for (int s = 0; s < steps; ++s) {
    const int k = last = chooser.next();
    int accepted = 0;
    for (int i = 0; i < k; ++i) {
      credit += accept;
      if (credit < 1.0) break;
      credit -= 1.0;
      ++accepted;
    }
    chooser.observe(k, accepted, base + per_token * (k + 1));
  }
  return last;
}

TEST(DraftLength, TriesEveryLengthThenPicksTheFastest) {
  // Drafts that are never accepted only cost: k = 0.
  DraftLengthChooser never(4);
  for (int k = 0; k <= 4; ++k) {
    ASSERT_EQ(never.next(), k);  // every k once, in order
    never.observe(k, 0, 1.0 + 0.5 * (k + 1));
  }
  EXPECT_EQ(never.next(), 0);
  // A step whose cost hardly grows with k (memory-bound GPU decode) and good drafts: the longest.
  DraftLengthChooser good(4);
  EXPECT_EQ(run(good, 10.0, 0.1, 0.9, 200), 4);
  EXPECT_GT(good.expected_tokens(4), 3.5);
  // Cost proportional to tokens (compute-bound, like CPU-homed experts at n = 8) and 50% drafts:
  // E(k)/t(k) falls with k, so no drafting pays.
  DraftLengthChooser costly(4);
  EXPECT_EQ(run(costly, 0.0, 1.0, 0.5, 200), 0);
}

TEST(DraftLength, KeepsExploring) {
  DraftLengthChooser c(2, 8);
  std::vector<int> chosen;
  for (int s = 0; s < 40; ++s) {
    const int k = c.next();
    chosen.push_back(k);
    c.observe(k, 0, 1.0 + k);
  }
  // After the first three steps k = 0 wins, but every 8th step tries the next k in turn.
  EXPECT_EQ(std::count(chosen.begin() + 3, chosen.end(), 1) + std::count(chosen.begin() + 3, chosen.end(), 2), 3);
  EXPECT_THROW(c.observe(3, 0, 1.0), Error);
  EXPECT_THROW(c.observe(1, 2, 1.0), Error);
  EXPECT_THROW(DraftLengthChooser(0), Error);
}

}  // namespace
}  // namespace frank::engine
