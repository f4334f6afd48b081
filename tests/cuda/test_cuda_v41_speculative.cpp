// DeepSeek-V4.1 speculative decoding's target on the GPU (cuda/cuda_v41_verify_target.h) and its
// exact rewind in device memory (cuda/device_v41_checkpoint.h), on the V4.1 fixtures the CPU tests
// use (tests/golden/test_rewind_v41.cpp, test_speculative_v41.cpp):
//   - a verify call of 1..5 tokens and of a whole window, at every position (both parities of the
//     ratio-2 groups, window-ring wraps), rewound to every keep, leaves the session that was fed
//     only the kept tokens one call at a time: the downloaded state field by field (rings, the
//     sources' entry counts, entries, index keys and open group, the Engram look-back, position),
//     then the next call's logits; a call rewound again, to fewer, too; a refused rewind changes
//     nothing;
//   - greedy speculative decoding with scripted drafters (all right, all wrong, mixed) emits plain
//     greedy CUDA decoding's tokens, k = 1..4;
//   - the target features a call keeps on the device match V41Model::forward's on the CPU.
// What is compared bit for bit: everything the rewind restores or counts (ring rows no kept token
// wrote, entries and open-group rows from before the call, entry counts, look-back, position), and
// the whole state and the next call's logits where both sides' rows come from calls of the same
// size (a one-token call, or nothing kept). The rows the kept tokens of a longer call wrote come
// from a call of another size than the plain path's one-token calls, and the kernels may round
// differently per call size (test_cuda_speculative.cpp: on V4 about 40% of such continuations are
// bit-identical); those rows and the next logits are held to the fp32 tolerance of
// test_cuda_v41.cpp, 1e-3 * max(1, |want|) (a stale or missing row moves them by far more), and how
// many were bit-identical is printed. Features: the same fp32 tolerance against the CPU.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cuda/cuda_forward_util.h"
#include "cuda/cuda_speculative_util.h"
#include "cuda/cuda_v41_util.h"
#include "frank/core/error.h"
#include "frank/cuda/cuda_v41_model.h"
#include "frank/cuda/cuda_v41_verify_target.h"
#include "frank/cuda/device_v41_checkpoint.h"
#include "frank/engine/v41_model.h"
#include "golden/dspark_fixture.h"
#include "golden/fixture.h"
#include "golden/greedy_reference.h"
#include "golden/scripted_drafter.h"

namespace frank::test {
namespace {

using Logits = engine::Model::Logits;

// The first `rows` rows of `a`, on the host (waits for a's stream).
std::vector<float> first_rows(const cuda::DeviceArray<float>& a, int64_t rows) {
  std::vector<float> out(static_cast<size_t>(rows * a.cols()));
  if (out.empty()) return out;
  cuda::check(cudaMemcpyAsync(out.data(), a.data(), out.size() * sizeof(float), cudaMemcpyDeviceToHost, a.stream()),
              "download");
  cuda::check(cudaStreamSynchronize(a.stream()), "download");
  return out;
}

Tensor to_host(const cuda::DeviceArray<float>& a) { return Tensor({a.rows(), a.cols()}, first_rows(a, a.rows())); }

// A DeviceV41Session on the host: what is defined of it (not the capacity past the entries, nor the
// rows of the pending buffers outside the open group, nor the last-call records).
struct HostSource {
  int ratio = 0;
  int64_t n_entries = 0;
  std::vector<float> entries, index_keys;  // [n_entries, head_dim], [n_entries, index_head_dim] (key owners)
  std::vector<float> open_kv, open_gate;   // the open group's rows, its first position first
};
struct HostState {
  int64_t position = 0;
  int64_t ring_rows = 0;
  std::vector<std::vector<float>> windows;  // [ring_rows, head_dim] per layer
  std::vector<std::optional<HostSource>> sources;
  std::vector<int32_t> engram;
};

HostState download(const cuda::DeviceV41Session& s) {
  HostState h{s.position, s.windows.front().rows(), {}, {}, s.engram.classes};
  for (const auto& ring : s.windows) h.windows.push_back(first_rows(ring, ring.rows()));
  for (const auto& source : s.sources) {
    auto& host = h.sources.emplace_back();
    if (!source) continue;
    HostSource& hs = host.emplace();
    hs.ratio = source->ratio;
    hs.n_entries = source->n_entries;
    hs.entries = first_rows(source->entries, source->n_entries);
    hs.index_keys = first_rows(source->index_keys, source->n_entries);
    if (source->ratio > 1) {
      const int64_t open = s.position % source->ratio;  // rows 0 .. open-1 (row = position % ratio)
      hs.open_kv = first_rows(source->pending_kv, open);
      hs.open_gate = first_rows(source->pending_gate, open);
    }
  }
  return h;
}

// Where a rewound session's rows may differ from the plain path's within the fp32 tolerance: the
// rows the kept tokens of a call of more than one token wrote. Everything else must match bit for
// bit; without a Kept, everything.
struct Kept {
  int64_t start = 0, keep = 0, window = 0;
  std::vector<int64_t> entries_before;  // per layer: the source's entry count before the call
};

bool close(float got, float want) {
  return std::abs(double{got} - want) <= 1e-3 * std::max(1.0, std::abs(double{want}));
}

// Tallies how many rows compared were bit-identical where they only had to be close.
struct Tally {
  int64_t rows = 0, identical = 0;
};

// `got` against `want`, rows of `width`: bit-identical where exact(row), else close. The first row
// that fails, or -1.
template <class Exact>
int64_t bad_row(const std::vector<float>& got, const std::vector<float>& want, int64_t width, Exact exact,
                Tally& tally) {
  if (got.size() != want.size()) return 0;
  for (int64_t r = 0; width > 0 && r < std::ssize(want) / width; ++r) {
    const float *a = got.data() + r * width, *b = want.data() + r * width;
    const bool identical = std::memcmp(a, b, static_cast<size_t>(width) * sizeof(float)) == 0;
    if (exact(r)) {
      if (!identical) return r;
      continue;
    }
    ++tally.rows;
    tally.identical += identical;
    for (int64_t i = 0; i < width; ++i)
      if (!close(a[i], b[i])) return r;
  }
  return -1;
}

testing::AssertionResult same_state(const HostState& got, const HostState& want, const Kept* kept, Tally& tally) {
  if (got.position != want.position)
    return testing::AssertionFailure() << "position " << got.position << " != " << want.position;
  if (got.engram != want.engram) return testing::AssertionFailure() << "Engram look-back";
  for (size_t l = 0; l < want.windows.size(); ++l) {
    const int64_t width = std::ssize(want.windows[l]) / want.ring_rows;
    // Ring row r was written by a kept token when r = (start + t) % window for some t < keep.
    auto exact = [&](int64_t r) {
      return kept == nullptr || (r - kept->start % kept->window + kept->window) % kept->window >= kept->keep;
    };
    if (const int64_t r = bad_row(got.windows[l], want.windows[l], width, exact, tally); r >= 0)
      return testing::AssertionFailure() << "window ring of layer " << l << ", row " << r;
  }
  for (size_t l = 0; l < want.sources.size(); ++l) {
    if (got.sources[l].has_value() != want.sources[l].has_value())
      return testing::AssertionFailure() << "source of layer " << l;
    if (!want.sources[l]) continue;
    const HostSource &a = *got.sources[l], &b = *want.sources[l];
    if (a.n_entries != b.n_entries)
      return testing::AssertionFailure() << "entries of layer " << l << ": " << a.n_entries << ", want "
                                         << b.n_entries;
    auto exact_entry = [&](int64_t e) { return kept == nullptr || e < kept->entries_before[l]; };
    const int64_t n = std::max<int64_t>(b.n_entries, 1);
    if (const int64_t e = bad_row(a.entries, b.entries, std::ssize(b.entries) / n, exact_entry, tally); e >= 0)
      return testing::AssertionFailure() << "entry " << e << " of layer " << l;
    if (const int64_t e = bad_row(a.index_keys, b.index_keys, std::ssize(b.index_keys) / n, exact_entry, tally);
        e >= 0)
      return testing::AssertionFailure() << "index key " << e << " of layer " << l;
    // Open-group row j holds position group + j: from before the call when that is before `start`.
    const int64_t group = want.position / b.ratio * b.ratio;
    auto exact_open = [&](int64_t j) { return kept == nullptr || group + j < kept->start; };
    const int64_t width = b.open_kv.empty() ? 0 : std::ssize(b.open_kv) / (want.position - group);
    if (bad_row(a.open_kv, b.open_kv, width, exact_open, tally) >= 0 ||
        bad_row(a.open_gate, b.open_gate, width, exact_open, tally) >= 0)
      return testing::AssertionFailure() << "open group of layer " << l << " (" << want.position - group
                                         << " rows from " << group << ")";
  }
  return testing::AssertionSuccess();
}

// Feeds `ids` to both sessions in one call each: bit-identical logits when `exact`, else close.
testing::AssertionResult same_logits_after(cuda::CudaV41Model& gpu, cuda::DeviceV41Session& got,
                                           cuda::DeviceV41Session& want, std::span<const int32_t> ids, bool exact,
                                           Tally& tally) {
  const Tensor a = gpu.forward(got, ids, Logits::All), b = gpu.forward(want, ids, Logits::All);
  const bool identical = std::memcmp(a.data.data(), b.data.data(), b.data.size() * sizeof(float)) == 0;
  if (!exact) {
    ++tally.rows;
    tally.identical += identical;
  }
  if (identical) return testing::AssertionSuccess();
  for (size_t i = 0; i < b.data.size(); ++i)
    if (exact || !close(a.data[i], b.data[i]))
      return testing::AssertionFailure() << "logit " << i % b.cols() << " of token " << i / b.cols() << ": "
                                         << a.data[i] << " != " << b.data[i];
  return testing::AssertionSuccess();
}

// The plain path: `from` fed ids[0], ids[1], ... one call each; [keep] has been fed keep of them.
std::vector<cuda::DeviceV41Session> fed_one_by_one(cuda::CudaV41Model& gpu, const cuda::DeviceV41Session& from,
                                                   std::span<const int32_t> ids) {
  std::vector<cuda::DeviceV41Session> out{from};
  for (size_t t = 0; t < ids.size(); ++t) {
    out.push_back(out.back());
    gpu.forward(out.back(), ids.subspan(t, 1), Logits::Last);
  }
  return out;
}

Kept kept_of(const model::V41Config& c, const cuda::DeviceV41Session& before_call, int64_t keep) {
  Kept k{before_call.position, keep, c.sliding_window, {}};
  for (const auto& source : before_call.sources) k.entries_before.push_back(source ? source->n_entries : 0);
  return k;
}

// Rewinds `session` (after the call `before` was taken for) to each of `keeps` in turn and checks
// it against the plain path's session `plain` and the next tokens `next`.
void expect_rewound(cuda::CudaV41Model& gpu, cuda::DeviceV41Session& session, const cuda::DeviceV41Checkpoint& before,
                    std::vector<int64_t> keeps, const cuda::DeviceV41Session& before_call,
                    const cuda::DeviceV41Session& plain, std::span<const int32_t> next, bool same_size_calls,
                    Tally& tally, const std::string& where) {
  for (const int64_t keep : keeps) cuda::v41_rewind(gpu, before, session, keep);
  const Kept kept = kept_of(gpu.model().config(), before_call, keeps.back());
  const bool exact = same_size_calls || keeps.back() == 0;
  ASSERT_TRUE(same_state(download(session), download(plain), exact ? nullptr : &kept, tally)) << where;
  cuda::DeviceV41Session want = plain;
  ASSERT_TRUE(same_logits_after(gpu, session, want, next, exact, tally)) << where;
}

TEST(CudaV41SpecRewind, KeepingAPrefixOfACallEqualsFeedingOnlyIt) {
  REQUIRE_GPU();
  for (const auto& dir : fixture_dirs("dsv41")) {
    const Fixture f = load_fixture(dir);
    const engine::V41Model model(load_v41(dir));
    cuda::CudaV41Model gpu(model, cuda::WeightType::F32);
    const int window = model.config().sliding_window;
    const std::span<const int32_t> ids(f.ids);
    const int64_t n = std::ssize(ids);
    std::vector<int32_t> wrong(ids.begin(), ids.end());  // rejected drafts: never the sequence's token
    for (auto& t : wrong) t = (t + 7) % static_cast<int32_t>(f.vocab);
    const bool has_groups = std::ranges::any_of(model.config().kv_source_layers,
                                                [&](int l) { return model.config().compress_ratio[l] > 1; });

    int checked = 0, wrapped = 0, group_from_call = 0;
    Tally tally;
    cuda::DeviceV41Session ran = gpu.new_session();
    for (int64_t p = 1; p + 1 < n; ++p) {
      gpu.forward(ran, ids.subspan(static_cast<size_t>(p - 1), 1), Logits::Last);  // ran is now at position p
      const int64_t longest = std::min<int64_t>(window, n - 1 - p);
      const auto plain = fed_one_by_one(gpu, ran, ids.subspan(static_cast<size_t>(p), longest));
      for (int64_t call : {1, 2, 3, 4, 5, window}) {
        if (call > longest) continue;
        for (int64_t keep = 0; keep <= call; ++keep) {
          std::vector<int32_t> fed(ids.begin() + p, ids.begin() + p + keep);
          fed.insert(fed.end(), wrong.begin() + p + keep, wrong.begin() + p + call);
          cuda::DeviceV41Session after = ran;
          const cuda::DeviceV41Checkpoint before = cuda::take_v41_checkpoint(gpu, after, fed);
          gpu.forward(after, fed, Logits::All);
          const size_t next = static_cast<size_t>(p + keep);
          expect_rewound(gpu, after, before, {keep}, ran, plain[keep],
                         ids.subspan(next, std::min<size_t>(3, n - next)), call == 1, tally,
                         fmt::format("{}: call of {} at {}, kept {}", f.name(), call, p, keep));
          if (HasFatalFailure()) return;
          ++checked;
          wrapped += p % window + call > window;
          group_from_call += has_groups && keep > 0 && keep < call && (p + keep) % 2 == 1;
        }
      }
    }
    std::cout << fmt::format(
        "[ v41 rewind ] {}: {} rewinds, {} wrap the ring, {} leave an open group from the call's rows; {} of {} "
        "rows and logits held to the tolerance were bit-identical\n",
        f.name(), checked, wrapped, group_from_call, tally.identical, tally.rows);
    EXPECT_GT(checked, 200) << f.name();
    EXPECT_GT(wrapped, 20) << f.name();
    if (has_groups) {
      EXPECT_GT(group_from_call, 20) << f.name();
    }
  }
}

// A verify call rewound to its accepted drafts can be rewound again, to fewer (the request ended at
// an earlier emitted token).
TEST(CudaV41SpecRewind, RewindingARewoundCallAgainKeepsFewer) {
  REQUIRE_GPU();
  for (const auto& dir : fixture_dirs("dsv41")) {
    const Fixture f = load_fixture(dir);
    const engine::V41Model model(load_v41(dir));
    cuda::CudaV41Model gpu(model, cuda::WeightType::F32);
    const std::span<const int32_t> ids(f.ids);
    Tally tally;
    for (int64_t p = 1; p + 7 < std::ssize(ids); p += 3) {
      const std::span<const int32_t> call = ids.subspan(static_cast<size_t>(p), 5);
      cuda::DeviceV41Session prefix = gpu.new_session();
      gpu.forward(prefix, ids.first(static_cast<size_t>(p)), Logits::Last);
      const auto plain = fed_one_by_one(gpu, prefix, call);
      for (int64_t first_keep = 1; first_keep <= 5; ++first_keep)
        for (int64_t second_keep = 0; second_keep <= first_keep; ++second_keep) {
          // A checkpoint holds addresses in its own session's memory: one call on one copy each.
          cuda::DeviceV41Session s = prefix;
          const cuda::DeviceV41Checkpoint before = cuda::take_v41_checkpoint(gpu, s, call);
          gpu.forward(s, call, Logits::All);
          expect_rewound(gpu, s, before, {first_keep, second_keep}, prefix, plain[second_keep],
                         ids.subspan(static_cast<size_t>(p + second_keep), 2), false, tally,
                         fmt::format("{} at {}: kept {} then {}", f.name(), p, first_keep, second_keep));
          if (HasFatalFailure()) return;
        }
    }
  }
}

TEST(CudaV41SpecRewind, RefusesWhatItCannotUndo) {
  REQUIRE_GPU();
  const auto dir = fixture_dirs("dsv41").front();
  const engine::V41Model model(load_v41(dir));
  cuda::CudaV41Model gpu(model, cuda::WeightType::F32);
  const std::vector<int32_t> ids(static_cast<size_t>(model.config().sliding_window) + 2, 3);
  const std::span<const int32_t> all(ids);
  Tally unused;
  cuda::DeviceV41Session s = gpu.new_session();
  EXPECT_THROW(cuda::take_v41_checkpoint(gpu, s, all), Error);  // longer than the window: rows overwritten
  const cuda::DeviceV41Checkpoint before = cuda::take_v41_checkpoint(gpu, s, all.first(3));
  gpu.forward(s, all.first(3), Logits::All);
  const HostState after = download(s);
  EXPECT_THROW(cuda::v41_rewind(gpu, before, s, 4), Error);  // keeps more than the call fed
  EXPECT_THROW(cuda::v41_rewind(gpu, before, s, -1), Error);
  cuda::DeviceV41Session copy = s;  // the same state, in other memory than the checkpoint's addresses
  EXPECT_THROW(cuda::v41_rewind(gpu, before, copy, 1), Error);
  EXPECT_TRUE(same_state(download(s), after, nullptr, unused)) << "a refused rewind must leave the session as it was";
  EXPECT_TRUE(same_state(download(copy), after, nullptr, unused));
  cuda::v41_rewind(gpu, before, s, 1);
  const HostState kept = download(s);
  EXPECT_THROW(cuda::v41_rewind(gpu, before, s, 2), Error);  // the rejected tokens are gone
  EXPECT_TRUE(same_state(download(s), kept, nullptr, unused));
  gpu.forward(s, all.first(1), Logits::All);  // the last call is no longer the checkpoint's
  const HostState fed = download(s);
  EXPECT_THROW(cuda::v41_rewind(gpu, before, s, 1), Error);
  EXPECT_TRUE(same_state(download(s), fed, nullptr, unused));

  // A call longer than the window cannot be rewound, so no raw rows are kept for it; a short one's are.
  cuda::DeviceV41Session long_call = gpu.new_session();
  gpu.forward(long_call, all, Logits::Last);
  for (const auto& source : long_call.sources)
    if (source && source->ratio > 1) {
      EXPECT_EQ(source->last_call.tokens, 0);
    }
  for (const auto& source : s.sources)
    if (source && source->ratio > 1) {
      EXPECT_EQ(source->last_call.tokens, 1);
    }
}

// What the V4.1 CUDA target cannot do says so, as the CPU one: it gives no streams, and takes no
// verify call longer than the window.
TEST(CudaV41SpecTarget, RefusesStreamsAndOverlongCalls) {
  REQUIRE_GPU();
  const engine::V41Model model(load_v41(fixture_dirs("dsv41").front()));
  cuda::CudaV41Model gpu(model, cuda::WeightType::F32);
  cuda::CudaV41VerifyTarget target(gpu);
  EXPECT_EQ(target.max_verify_tokens(), model.config().sliding_window);
  const std::vector<int32_t> ids(static_cast<size_t>(target.max_verify_tokens()) + 1, 3);
  Tensor streams;
  EXPECT_THROW(target.forward(std::span(ids).first(2), Logits::Last, &streams), Error);
  EXPECT_THROW(target.verify(std::span(ids).first(2), &streams), Error);
  EXPECT_THROW(target.verify(ids, nullptr), Error);
  EXPECT_EQ(target.position(), 0);
  EXPECT_EQ(target.verify(std::span(ids).first(2), nullptr).rows(), 2);
  // Features need a DSpark drafter's config, which this fixture has not.
  cuda::CudaV41VerifyTarget with_features(gpu, true);
  EXPECT_THROW(with_features.forward(std::span(ids).first(2), Logits::Last, nullptr), Error);
  EXPECT_EQ(with_features.position(), 0);
}

TEST(CudaV41SpecGreedy, EqualsPlainGreedyForEveryDrafter) {
  REQUIRE_GPU();
  const size_t prompt_length = 6, total = prompt_length + 48;  // closes groups, wraps the rings
  for (const auto& dir : fixture_dirs("dsv41")) {
    const Fixture f = load_fixture(dir);
    const engine::V41Model model(load_v41(dir));
    cuda::CudaV41Model gpu(model, cuda::WeightType::F32);
    const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + prompt_length);
    const std::vector<int32_t> plain = plain_greedy(gpu, prompt, total, f.vocab);
    for (int k = 1; k <= 4; ++k)
      for (const auto& [name, wrong] : scripted_drafters()) {
        ScriptedDrafter drafter(plain, static_cast<int>(f.vocab), wrong, /*host_streams=*/false);
        std::vector<int32_t> tokens = prompt;
        cuda::CudaV41VerifyTarget target(gpu);
        const auto st = speculative_greedy(target, drafter, k, tokens, total);
        ASSERT_EQ(tokens, plain) << f.name() << ": k = " << k << ", drafter " << name;
        if (std::string(name) == "right") {
          EXPECT_EQ(st.accepted, st.drafted) << f.name() << ", k = " << k;
        }
        if (std::string(name) == "wrong") {
          EXPECT_EQ(st.accepted, 0) << f.name() << ", k = " << k;
        }
        if (std::string(name) == "mixed") {
          EXPECT_TRUE(st.accepted > 0 && st.accepted < st.drafted) << f.name() << ", k = " << k;
        }
        EXPECT_EQ(st.emitted, st.verify_steps + st.accepted);
      }
    std::cout << fmt::format("[ v41 speculative ] {}: greedy with k = 1..4 and 3 drafters = plain greedy ({} tokens)\n",
                             f.name(), total - prompt_length);
  }
}

// The features a call keeps on the device (DeviceFeatureSource) against V41Model::forward's on the
// CPU, for a prefill, a verify call, after its rewind (its first rows stay), and the next call.
TEST(CudaV41SpecFeatures, MatchTheCpuReference) {
  REQUIRE_GPU();
  const engine::V41Model model(load_dspark_fixture_model());
  const auto ids = dspark_golden().at("ids").get<std::vector<int32_t>>();
  engine::V41Session cpu = model.new_session();
  Tensor want;
  model.forward(cpu, std::span(ids).first(16), Logits::All, &want);

  cuda::CudaV41Model gpu(model, cuda::WeightType::F32);
  cuda::CudaV41VerifyTarget target(gpu, /*with_features=*/true);
  const cuda::DeviceFeatureSource& source = target;
  auto expect_rows = [&](int64_t start, int64_t rows, const std::string& what) {
    ASSERT_EQ(source.last_features_start(), start) << what;
    const Tensor got = to_host(source.device_features());
    ASSERT_GE(got.rows(), rows) << what;
    ASSERT_EQ(got.cols(), want.cols()) << what;
    auto first = [&](const Tensor& t, int64_t from) {
      return Tensor({rows, t.cols()}, std::vector<float>(t.row(from), t.row(from) + rows * t.cols()));
    };
    const Tensor got_rows = first(got, 0), want_rows = first(want, start);
    const Worst w = compare(got_rows, want_rows);
    std::cout << fmt::format("[ v41 features ] {}: max scaled |cuda - cpu| = {:.3g}\n", what, w.err);
    EXPECT_LE(w.err, 1e-3) << what << ": position " << start + w.row << ", value " << w.col;
  };
  target.forward(std::span(ids).first(6), Logits::Last, nullptr);
  expect_rows(0, 6, "prefill of 6");
  target.verify(std::span(ids).subspan(6, 5), nullptr);
  expect_rows(6, 5, "verify call of 5 at 6");
  target.rewind(2);
  expect_rows(6, 2, "the same call rewound to 2");
  target.verify(std::span(ids).subspan(8, 4), nullptr);
  expect_rows(8, 4, "verify call of 4 at 8");

  cuda::CudaV41VerifyTarget without(gpu);
  without.forward(std::span(ids).first(3), Logits::Last, nullptr);
  EXPECT_TRUE(without.device_features().empty());
}

}  // namespace
}  // namespace frank::test
