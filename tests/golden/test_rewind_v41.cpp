// v41_rewind, the rollback of a DeepSeek-V4.1 verify call: after a forward call of n tokens, keeping
// the first `keep` must leave exactly the session that was fed only those — window rings, ratio-2
// open groups, compressed entries and indexer keys, Engram look-back — field by field, and the
// tokens after it must get bit-identical logits. The plain path it is compared with feeds the kept
// tokens one call at a time and never rewinds. Checked on every V4.1 fixture at every start position
// (both parities of the ratio-2 groups, window-ring wraps), with calls of 1..5 tokens (a verify step
// of k = 0..4 drafts) and of a whole window, for every keep, the rejected tokens differing from the
// kept sequence's.
#include <gtest/gtest.h>

#include <span>

#include "fixture.h"
#include "frank/engine/v41_model.h"
#include "frank/engine/v41_rewind.h"
#include "frank/model/loader_v41.h"

namespace frank::engine {
namespace {

V41Model load(const std::filesystem::path& dir) {
  return V41Model(model::load_v41_model(dir, dir / "reference.safetensors"));
}

// Every field of the sequence's state; not the last-call records (v41_rewind.h).
testing::AssertionResult same_state(const V41Session& got, const V41Session& want) {
  if (got.position != want.position)
    return testing::AssertionFailure() << "position " << got.position << " != " << want.position;
  for (size_t l = 0; l < want.windows.size(); ++l)
    if (got.windows[l] != want.windows[l]) return testing::AssertionFailure() << "window ring of layer " << l;
  for (size_t l = 0; l < want.sources.size(); ++l) {
    if (got.sources[l].has_value() != want.sources[l].has_value())
      return testing::AssertionFailure() << "source of layer " << l;
    if (!want.sources[l]) continue;
    const V41SourceState &a = *got.sources[l], &b = *want.sources[l];
    if (a.pending != b.pending || a.pending_position != b.pending_position || a.pending_kv != b.pending_kv ||
        a.pending_gate != b.pending_gate)
      return testing::AssertionFailure() << "open group of layer " << l << ": " << a.pending << " rows from "
                                         << a.pending_position << ", want " << b.pending << " from "
                                         << b.pending_position;
    if (a.n_entries != b.n_entries || a.entries != b.entries || a.index_keys != b.index_keys)
      return testing::AssertionFailure() << "entries of layer " << l << ": " << a.n_entries << ", want "
                                         << b.n_entries;
  }
  if (got.engram.classes != want.engram.classes) return testing::AssertionFailure() << "Engram look-back";
  return testing::AssertionSuccess();
}

// Feeds `ids` to both sessions in one call each and requires bit-identical logits.
testing::AssertionResult same_logits_after(const V41Model& model, V41Session& got, V41Session& want,
                                           std::span<const int32_t> ids) {
  const Tensor a = model.forward(got, ids), b = model.forward(want, ids);
  for (size_t i = 0; i < b.data.size(); ++i)
    if (a.data[i] != b.data[i])
      return testing::AssertionFailure() << "logit " << i % b.cols() << " of token " << i / b.cols() << ": "
                                         << a.data[i] << " != " << b.data[i];
  return testing::AssertionSuccess();
}

// The plain path: `from` fed ids[p], ids[p+1], ... one call each; [keep] has been fed keep of them.
std::vector<V41Session> fed_one_by_one(const V41Model& model, const V41Session& from, std::span<const int32_t> ids) {
  std::vector<V41Session> out{from};
  for (size_t t = 0; t < ids.size(); ++t) {
    out.push_back(out.back());
    model.forward(out.back(), ids.subspan(t, 1));
  }
  return out;
}

TEST(RewindV41Golden, KeepingAPrefixOfACallEqualsNeverFeedingTheRest) {
  for (const auto& dir : test::fixture_dirs("dsv41")) {
    const auto f = test::load_fixture(dir);
    const V41Model model = load(dir);
    const int window = model.config().sliding_window;
    const std::span<const int32_t> ids(f.ids);
    const int64_t n = static_cast<int64_t>(ids.size());
    std::vector<int32_t> wrong(ids.begin(), ids.end());  // rejected drafts: never the sequence's token
    for (auto& t : wrong) t = (t + 7) % static_cast<int32_t>(f.vocab);

    // What the checks went through: rewinds that had to restore ring rows, wrapped the ring, emptied
    // or refilled an open ratio-2 group from the call's own rows, cut entries, moved the look-back.
    int checked = 0, wrapped = 0, rows = 0, groups = 0, group_from_call = 0, entries = 0, engram = 0;
    V41Session ran = model.new_session();
    for (int64_t p = 1; p + 1 < n; ++p) {
      model.forward(ran, ids.subspan(static_cast<size_t>(p - 1), 1));  // ran is now at position p
      const int64_t longest = std::min<int64_t>(window, n - 1 - p);
      const std::vector<V41Session> plain = fed_one_by_one(model, ran, ids.subspan(static_cast<size_t>(p), longest));
      for (int64_t call : {1, 2, 3, 4, 5, window}) {
        if (call > longest) continue;
        for (int64_t keep = 0; keep <= call; ++keep) {
          std::vector<int32_t> fed(ids.begin() + p, ids.begin() + p + keep);
          fed.insert(fed.end(), wrong.begin() + p + keep, wrong.begin() + p + call);
          V41Session after = ran;
          const V41CallCheckpoint before = take_v41_checkpoint(model, after, fed);
          model.forward(after, fed);
          V41Session rewound = after;
          v41_rewind(model, before, rewound, keep);
          const std::string where = fmt::format("{}: call of {} at {}, kept {}", f.name(), call, p, keep);
          ASSERT_TRUE(same_state(rewound, plain[keep])) << where;
          V41Session want = plain[keep];
          const size_t next = static_cast<size_t>(p + keep);
          ASSERT_TRUE(same_logits_after(model, rewound, want, ids.subspan(next, std::min<size_t>(3, n - next))))
              << where;
          ASSERT_TRUE(same_state(rewound, want)) << where << ", then fed on";

          ++checked;
          wrapped += p % window + call > window;
          rows += after.windows != plain[keep].windows;
          engram += after.engram.classes != plain[keep].engram.classes;
          for (size_t l = 0; l < after.sources.size(); ++l) {
            if (!after.sources[l]) continue;
            const V41SourceState &a = *after.sources[l], &b = *plain[keep].sources[l];
            entries += a.n_entries != b.n_entries;
            groups += a.pending != b.pending || a.pending_kv != b.pending_kv;
            group_from_call += b.pending > 0 && b.pending_position >= p && keep < call;
          }
        }
      }
    }
    std::cout << fmt::format(
        "[rewind-v41] {}: {} rewinds; {} wrap the ring, {} restore ring rows, {} open groups, {} of them from "
        "the call's rows, {} cut entries, {} move the Engram look-back\n",
        f.name(), checked, wrapped, rows, groups, group_from_call, entries, engram);
    EXPECT_GT(checked, 500) << f.name();
    for (int count : {wrapped, rows, groups, group_from_call, entries, engram}) EXPECT_GT(count, 20) << f.name();
  }
}

// A verify step that already rolled back its rejected drafts can be rolled back further (the
// request ended at an earlier emitted token): rewinding the rewound session again, from the same
// checkpoint, to fewer tokens equals feeding only those.
TEST(RewindV41Golden, RewindingARewoundCallAgainKeepsFewer) {
  const auto dir = test::fixture_dirs("dsv41").front();
  const auto f = test::load_fixture(dir);
  const V41Model model = load(dir);
  const std::span<const int32_t> ids(f.ids);
  for (int64_t p = 1; p + 7 < static_cast<int64_t>(ids.size()); p += 3) {
    V41Session s = model.new_session();
    model.forward(s, ids.first(static_cast<size_t>(p)));
    const std::vector<V41Session> plain = fed_one_by_one(model, s, ids.subspan(static_cast<size_t>(p), 5));
    const V41CallCheckpoint before = take_v41_checkpoint(model, s, ids.subspan(static_cast<size_t>(p), 5));
    model.forward(s, ids.subspan(static_cast<size_t>(p), 5));
    for (int64_t first_keep = 1; first_keep <= 5; ++first_keep)
      for (int64_t second_keep = 0; second_keep <= first_keep; ++second_keep) {
        V41Session twice = s;
        v41_rewind(model, before, twice, first_keep);
        v41_rewind(model, before, twice, second_keep);
        const std::string where = fmt::format("at {}: kept {} then {}", p, first_keep, second_keep);
        ASSERT_TRUE(same_state(twice, plain[second_keep])) << where;
        V41Session want = plain[second_keep];
        ASSERT_TRUE(same_logits_after(model, twice, want, ids.subspan(static_cast<size_t>(p + second_keep), 2)))
            << where;
      }
  }
}

TEST(RewindV41, RefusesWhatItCannotUndo) {
  const V41Model model = load(test::fixture_dirs("dsv41").front());
  const std::vector<int32_t> ids(static_cast<size_t>(model.config().sliding_window) + 2, 3);
  const std::span<const int32_t> all(ids);
  V41Session s = model.new_session();
  EXPECT_THROW(take_v41_checkpoint(model, s, all), Error);  // longer than the window: rows overwritten
  const V41CallCheckpoint before = take_v41_checkpoint(model, s, all.first(3));
  model.forward(s, all.first(3));
  const V41Session after = s;
  EXPECT_THROW(v41_rewind(model, before, s, 4), Error);  // keeps more than the call fed
  EXPECT_THROW(v41_rewind(model, before, s, -1), Error);
  EXPECT_TRUE(same_state(s, after)) << "a refused rewind must leave the session as it was";
  v41_rewind(model, before, s, 1);
  EXPECT_THROW(v41_rewind(model, before, s, 2), Error);  // the rejected tokens are gone
  model.forward(s, all.first(1));                        // the last call is no longer the checkpoint's
  EXPECT_THROW(v41_rewind(model, before, s, 1), Error);

  // A call longer than the window cannot be rewound, so no raw rows are kept for it.
  V41Session long_call = model.new_session();
  model.forward(long_call, all);
  for (const auto& source : long_call.sources) {
    if (source) {
      EXPECT_TRUE(source->last_call.kv.empty() && source->last_call.tokens == 0);
    }
  }
}

}  // namespace
}  // namespace frank::engine
