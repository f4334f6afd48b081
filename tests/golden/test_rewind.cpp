// Model::rewind, the rollback of a speculative verify step: after a forward call of n tokens from
// a checkpoint, keeping the first `keep` of them must leave exactly the session that consumed only
// those — window rows, compressor open windows and overlap halves, compressed entries, index keys —
// so the tokens after it get bit-identical logits. Checked on every golden fixture at every start
// position (every offset in a CSA window, HCA window closes, window-ring wraps), with calls of
// 1..5 tokens (a verify step of k = 0..4 drafts) and every keep.
#include <gtest/gtest.h>

#include <span>

#include "fixture.h"
#include "frank/engine/model.h"
#include "frank/engine/run_modes.h"
#include "frank/model/loader.h"

namespace frank::engine {
namespace {

TEST(RewindGolden, KeepingAPrefixOfACallEqualsNeverFeedingTheRest) {
  for (const auto& dir : test::fixture_dirs()) {
    const auto f = test::load_fixture(dir);
    auto loaded = model::load_model(dir);
    const Model model(std::move(loaded.config), std::move(loaded.weights));
    const std::span<const int32_t> ids(f.ids);
    const int64_t n = static_cast<int64_t>(ids.size());
    const Tensor fresh = sequence_logits(model, ids, FeedMode{});
    // Rejected drafts: tokens that differ from the sequence (they must leave no trace).
    std::vector<int32_t> wrong(ids.begin(), ids.end());
    for (auto& t : wrong) t = (t + 7) % static_cast<int32_t>(f.vocab);

    Session ran = model.new_session();
    int checked = 0;
    for (int64_t p = 1; p + 1 < n; ++p) {
      model.forward(ran, ids.subspan(static_cast<size_t>(p - 1), 1));  // ran is now at position p
      const SessionCheckpoint before = take_checkpoint(ran);
      for (int64_t call = 1; call <= 5 && p + call < n; ++call) {
        for (int64_t keep = 0; keep <= call; ++keep) {
          // The call feeds `keep` right tokens, then wrong ones.
          std::vector<int32_t> fed(ids.begin() + p, ids.begin() + p + keep);
          fed.insert(fed.end(), wrong.begin() + p + keep, wrong.begin() + p + call);
          Session after = restore_checkpoint(before, ran);
          model.forward(after, fed);
          Session rewound = model.rewind(before, after, keep);
          ASSERT_EQ(rewound.position, p + keep);
          // The next token after the kept prefix sees exactly the history of the plain run.
          const Tensor next = model.forward(rewound, ids.subspan(static_cast<size_t>(p + keep), 1));
          for (int64_t v = 0; v < f.vocab; ++v)
            ASSERT_EQ(next.row(0)[v], fresh.row(p + keep)[v])
                << f.name() << ": call of " << call << " at " << p << ", kept " << keep << ", token " << v;
          ++checked;
        }
      }
    }
    EXPECT_GT(checked, 1000) << f.name();
  }
}

// A verify step that already rolled back its rejected drafts can be rolled back further (the
// request ended at an earlier emitted token): rewinding the rewound session again, from the same
// checkpoint, to fewer tokens equals feeding only those.
TEST(RewindGolden, RewindingARewoundCallAgainKeepsFewer) {
  const auto dir = test::fixture_dirs().front();
  const auto f = test::load_fixture(dir);
  auto loaded = model::load_model(dir);
  const Model model(std::move(loaded.config), std::move(loaded.weights));
  const std::span<const int32_t> ids(f.ids);
  const Tensor fresh = sequence_logits(model, ids, FeedMode{});
  for (int64_t p = 1; p + 6 < static_cast<int64_t>(ids.size()); p += 3) {
    Session s = model.new_session();
    model.forward(s, ids.first(static_cast<size_t>(p)));
    const SessionCheckpoint before = take_checkpoint(s);
    model.forward(s, ids.subspan(static_cast<size_t>(p), 5));
    for (int64_t first_keep = 1; first_keep <= 5; ++first_keep)
      for (int64_t second_keep = 1; second_keep <= first_keep; ++second_keep) {
        const Session once = model.rewind(before, s, first_keep);
        Session twice = model.rewind(before, once, second_keep);
        const Tensor next = model.forward(twice, ids.subspan(static_cast<size_t>(p + second_keep), 1));
        for (int64_t v = 0; v < f.vocab; ++v)
          ASSERT_EQ(next.row(0)[v], fresh.row(p + second_keep)[v])
              << f.name() << " at " << p << ": kept " << first_keep << " then " << second_keep;
      }
  }
}

TEST(Rewind, RefusesWhatItCannotUndo) {
  for (const auto& dir : test::fixture_dirs()) {
    auto loaded = model::load_model(dir);
    const Model model(std::move(loaded.config), std::move(loaded.weights));
    const std::vector<int32_t> ids(static_cast<size_t>(model.config().sliding_window) + 2, 3);
    Session s = model.new_session();
    const SessionCheckpoint before = take_checkpoint(s);
    model.forward(s, std::span<const int32_t>(ids).first(2));
    EXPECT_THROW(model.rewind(before, s, 3), Error);   // keeps more than the call fed
    EXPECT_THROW(model.rewind(before, s, -1), Error);
    Session long_call = model.new_session();
    model.forward(long_call, ids);                        // longer than the window: rows overwritten
    EXPECT_THROW(model.rewind(before, long_call, 1), Error);
    Session two_calls = model.new_session();
    model.forward(two_calls, std::span<const int32_t>(ids).first(2));
    model.forward(two_calls, std::span<const int32_t>(ids).subspan(2, 2));  // the record is of the last call only
    EXPECT_THROW(model.rewind(before, two_calls, 1), Error);
    return;  // one fixture is enough for the argument checks
  }
}

}  // namespace
}  // namespace frank::engine
