// Resuming from the prefix cache gives exactly the logits of a fresh run over the same tokens.
#include <gtest/gtest.h>

#include <chrono>
#include <fmt/format.h>
#include <numeric>

#include "fixture.h"
#include "frank/engine/prefix_cache.h"
#include "frank/engine/run_modes.h"
#include "frank/model/loader.h"
#include "frank/model/synthetic.h"

namespace frank::engine {
namespace {

std::unique_ptr<Model> load(const std::filesystem::path& dir) {
  auto m = model::load_model(dir);
  return std::make_unique<Model>(std::move(m.config), std::move(m.weights));
}

// Resuming at every position p (a checkpoint taken there, restored from the session that ran on
// to the end) and running the rest reproduces the uninterrupted run bit for bit: the same
// arithmetic in the same order. Positions cover every offset inside a CSA window (p % 4 == 0 is
// right after a window close), HCA window closes and window-ring wraps.
TEST(PrefixCacheGolden, ResumeFromEveryPositionEqualsFreshRun) {
  for (const auto& dir : test::fixture_dirs()) {
    const auto f = test::load_fixture(dir);
    const auto model = load(dir);
    const std::span<const int32_t> ids(f.ids);
    const int64_t n = static_cast<int64_t>(ids.size());
    const Tensor fresh = sequence_logits(*model, ids, FeedMode{});

    std::vector<int64_t> positions(n - 1);
    std::iota(positions.begin(), positions.end(), 1);
    std::vector<SessionCheckpoint> checkpoints;
    Session ran = model->new_session();
    prefill_with_checkpoints(*model, ran, ids, positions, checkpoints);
    ASSERT_EQ(static_cast<int64_t>(checkpoints.size()), n - 1);

    for (const auto& checkpoint : checkpoints) {
      const int64_t p = checkpoint.position;
      Session resumed = restore_checkpoint(checkpoint, ran);
      const Tensor rest = model->forward(resumed, ids.subspan(p));
      for (int64_t t = p; t < n; ++t)
        for (int64_t v = 0; v < f.vocab; ++v)
          ASSERT_EQ(rest.row(t - p)[v], fresh.row(t)[v]) << f.name() << ": resumed at " << p << ", position " << t;
    }
  }
}

std::vector<int32_t> random_tokens(size_t n, uint32_t seed, int vocab) {
  std::vector<int32_t> out(n);
  for (auto& t : out) t = static_cast<int32_t>((seed = seed * 1664525u + 1013904223u) >> 8) % vocab;
  return out;
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// An agent conversation: 10 turns, each the whole history plus a new message. Each warm turn
// resumes from the end of the previous one and runs only its new tokens; its logits equal a cold
// run's. Times are printed (not asserted: CI machines vary); what is asserted is the work done.
TEST(PrefixCacheGolden, TenTurnConversationRunsOnlyNewTokens) {
  auto m = model::synthetic_model("tiny", 3);
  Model model(std::move(m.config), std::move(m.weights));
  PrefixCache cache(size_t{1} << 30);
  std::vector<int32_t> history;
  for (int turn = 0; turn < 10; ++turn) {
    const auto message = random_tokens(37 + 11 * turn, 100 + turn, 256);
    history.insert(history.end(), message.begin(), message.end());

    auto t0 = std::chrono::steady_clock::now();
    auto resume = cache.resume(history);
    Session session = resume ? std::move(resume->session) : model.new_session();
    const int64_t reused = resume ? resume->reused_tokens : 0;
    std::vector<SessionCheckpoint> checkpoints = resume ? std::move(resume->checkpoints) : std::vector<SessionCheckpoint>{};
    const Tensor warm = prefill_with_checkpoints(model, session, std::span<const int32_t>(history).subspan(reused),
                                                 {reused + 16}, checkpoints);
    const double warm_ms = ms_since(t0);

    t0 = std::chrono::steady_clock::now();
    Session cold_session = model.new_session();
    const Tensor cold = model.forward(cold_session, history);
    const double cold_ms = ms_since(t0);

    const int64_t expected_reuse = turn == 0 ? 0 : static_cast<int64_t>(history.size() - message.size());
    EXPECT_EQ(reused, expected_reuse) << "turn " << turn;
    const float* w = warm.row(warm.rows() - 1);
    const float* c = cold.row(cold.rows() - 1);
    for (int v = 0; v < 256; ++v) ASSERT_EQ(w[v], c[v]) << "turn " << turn;
    std::cout << fmt::format("[prefix-cache] turn {}: {} tokens, {} new; warm {:.1f} ms, cold {:.1f} ms\n", turn,
                             history.size(), history.size() - reused, warm_ms, cold_ms);
    cache.store(history, std::move(session), std::move(checkpoints));
    EXPECT_EQ(cache.conversations(), 1u) << "each turn supersedes the previous one";
  }
}

TEST(PrefixCache, DivergingPromptResumesFromLastCheckpointBeforeTheFork) {
  auto m = model::synthetic_model("tiny", 4);
  Model model(std::move(m.config), std::move(m.weights));
  PrefixCache cache(size_t{1} << 30);
  const auto a = random_tokens(60, 7, 256);
  Session s = model.new_session();
  std::vector<SessionCheckpoint> checkpoints;
  prefill_with_checkpoints(model, s, a, {10, 20, 30, 40, 50}, checkpoints);
  cache.store(a, std::move(s), std::move(checkpoints));

  auto b = a;
  b[33] = (b[33] + 1) % 256;  // the conversations part after token 32
  auto r = cache.resume(b);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reused_tokens, 30);
  EXPECT_EQ(r->checkpoints.size(), 3u);
  const Tensor resumed = model.forward(r->session, std::span<const int32_t>(b).subspan(30));
  Session fresh = model.new_session();
  const Tensor full = model.forward(fresh, b);
  for (int v = 0; v < 256; ++v) ASSERT_EQ(resumed.row(resumed.rows() - 1)[v], full.row(full.rows() - 1)[v]);

  // A prompt that is exactly the kept sequence leaves its last token to run: resume at 50.
  EXPECT_EQ(cache.resume(a)->reused_tokens, 50);
  EXPECT_FALSE(cache.resume(random_tokens(20, 99, 256)));
}

TEST(PrefixCache, EvictsLeastRecentlyUsedWithinBudget) {
  auto m = model::synthetic_model("tiny", 5);
  Model model(std::move(m.config), std::move(m.weights));
  auto kept = [&](uint32_t seed) {
    const auto t = random_tokens(40, seed, 256);
    Session s = model.new_session();
    model.forward(s, t);
    return std::pair{t, s};
  };
  auto [a, sa] = kept(1);
  const size_t one = session_bytes(sa);
  PrefixCache cache(2 * one + one / 2);
  auto [b, sb] = kept(2);
  auto [c, sc] = kept(3);
  cache.store(a, sa, {});
  cache.store(b, sb, {});
  auto more_a = a;
  more_a.push_back(1);
  ASSERT_TRUE(cache.resume(more_a));  // a becomes most recent
  cache.store(c, sc, {});              // evicts b
  EXPECT_EQ(cache.conversations(), 2u);
  EXPECT_EQ(cache.evictions(), 1u);
  auto more_b = b;
  more_b.push_back(1);
  EXPECT_FALSE(cache.resume(more_b));
  EXPECT_TRUE(cache.resume(more_a));
  EXPECT_LE(cache.bytes(), 2 * one + one / 2);
}

TEST(ModelLogits, LastOnlyEqualsTheLastRowOfAll) {
  // The server's prefill asks for the last position's logits only; they must be the same numbers.
  auto m = model::synthetic_model("tiny", 6);
  Model model(std::move(m.config), std::move(m.weights));
  const auto tokens = random_tokens(37, 8, 256);
  Session all_session = model.new_session(), last_session = model.new_session();
  const Tensor all = model.forward(all_session, tokens);
  const Tensor last = model.forward(last_session, tokens, Model::Logits::Last);
  ASSERT_EQ(last.rows(), 1);
  ASSERT_EQ(last.cols(), all.cols());
  for (int64_t v = 0; v < all.cols(); ++v) ASSERT_EQ(last.row(0)[v], all.row(all.rows() - 1)[v]) << v;
  EXPECT_EQ(last_session.position, all_session.position);
}

TEST(PrefixCache, ConversationTooLargeForTheBudgetLeavesWhatItExtends) {
  auto m = model::synthetic_model("tiny", 5);
  Model model(std::move(m.config), std::move(m.weights));
  const auto tokens = random_tokens(80, 4, 256);
  const std::vector<int32_t> first(tokens.begin(), tokens.begin() + 40);
  Session s = model.new_session();
  model.forward(s, first);
  const size_t budget = session_bytes(s) + 1;
  PrefixCache cache(budget);
  cache.store(first, s, {});
  model.forward(s, std::span<const int32_t>(tokens).subspan(40));
  ASSERT_GT(session_bytes(s), budget);  // compressed entries and indexer keys grew
  cache.store(tokens, s, {});  // the grown conversation does not fit
  // The turn before it is still kept and is where the next turn of this conversation resumes.
  EXPECT_EQ(cache.conversations(), 1u);
  auto next_turn = tokens;
  next_turn.push_back(7);
  ASSERT_TRUE(cache.resume(next_turn));
  EXPECT_EQ(cache.resume(next_turn)->reused_tokens, 40);
}

}  // namespace
}  // namespace frank::engine
