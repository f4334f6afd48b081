// The rules a DeepSeek-V4.1 rewind shares between the CPU reference and the device
// (engine/v41_rewind.h): the entry count of a kept prefix, the window bound, and the continuation
// check, here over session and checkpoint types shaped as the device's (cuda::DeviceV41Session,
// cuda::DeviceV41Checkpoint: only what the check reads), so the template is checked on the CPU as
// the device rewind instantiates it. The CPU rewind's own use is test_rewind_v41.cpp.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "frank/core/error.h"
#include "frank/engine/v41_rewind.h"

namespace frank::engine {
namespace {

struct Record {
  int64_t start = 0, tokens = 0;
};
struct Source {
  int64_t n_entries = 0;
  Record last_call;
};
struct Session {
  int64_t position = 0;
  std::vector<std::optional<Source>> sources;
};
struct Mark {
  int64_t n_entries = 0;
};
struct Checkpoint {
  int64_t position = 0;
  std::vector<int32_t> ids;
  std::vector<std::optional<Mark>> sources;
};

model::V41Config config() {
  model::V41Config c;
  c.sliding_window = 8;
  c.compress_ratio = {1, 2, 0};  // a ratio-1 source, a ratio-2 source, a layer that owns none
  return c;
}

TEST(V41Continuation, KeptEntriesCountTheGroupsTheKeptTokensClose) {
  EXPECT_EQ(v41_kept_entries(10, 5, 3, 1), 13);  // ratio 1: one entry per token
  EXPECT_EQ(v41_kept_entries(2, 5, 0, 2), 2);
  EXPECT_EQ(v41_kept_entries(2, 5, 1, 2), 3);  // position 5 closes group 2 (positions 4, 5)
  EXPECT_EQ(v41_kept_entries(2, 5, 2, 2), 3);
  EXPECT_EQ(v41_kept_entries(2, 5, 3, 2), 4);
  EXPECT_EQ(v41_kept_entries(2, 4, 1, 2), 2);  // position 4 opens group 2
}

TEST(V41Continuation, WindowBoundsTheCall) {
  EXPECT_NO_THROW(check_v41_rewindable(config(), 8));
  EXPECT_THROW(check_v41_rewindable(config(), 9), Error);
}

TEST(V41Continuation, AcceptsTheCallAndItsRewindsOnlyToFewer) {
  const model::V41Config c = config();
  // A 3-token call at 5: 10 -> 13 entries (ratio 1), 2 -> 4 (ratio 2: positions 5 and 7 close groups).
  const Checkpoint before{5, {1, 2, 3}, {Mark{10}, Mark{2}, std::nullopt}};
  Session after{8, {Source{13, {}}, Source{4, {5, 3}}, std::nullopt}};
  for (int64_t keep = 0; keep <= 3; ++keep) EXPECT_NO_THROW(check_v41_continuation(c, before, after, keep)) << keep;
  EXPECT_THROW(check_v41_continuation(c, before, after, 4), Error);
  EXPECT_THROW(check_v41_continuation(c, before, after, -1), Error);

  Session rewound = after;  // kept 1: position 6, 11 and 3 entries, the record still the call's
  rewound.position = 6;
  rewound.sources[0]->n_entries = 11;
  rewound.sources[1]->n_entries = 3;
  EXPECT_NO_THROW(check_v41_continuation(c, before, rewound, 1));
  EXPECT_NO_THROW(check_v41_continuation(c, before, rewound, 0));
  EXPECT_THROW(check_v41_continuation(c, before, rewound, 2), Error);  // the rejected tokens are gone

  Session later = after;  // another call since: its record, not the checkpoint's
  later.sources[1]->last_call = {8, 1};
  EXPECT_THROW(check_v41_continuation(c, before, later, 1), Error);
  Session shorter = after;  // a call of other length at the same position
  shorter.sources[1]->last_call = {5, 2};
  EXPECT_THROW(check_v41_continuation(c, before, shorter, 1), Error);
  Session fewer = after;  // fewer entries than the kept tokens close: not the session after the call
  fewer.sources[0]->n_entries = 12;
  EXPECT_THROW(check_v41_continuation(c, before, fewer, 3), Error);
  Session other{8, {Source{13, {}}, Source{4, {5, 3}}}};  // another model's layers
  EXPECT_THROW(check_v41_continuation(c, before, other, 1), Error);
}

}  // namespace
}  // namespace frank::engine
