// The verify step's rollback on the GPU (cuda/device_checkpoint.h) and speculative decoding on the
// CUDA backend (cuda/cuda_verify_target.h), on every golden fixture:
//   - a verify call of 1..5 tokens (k = 0..4 drafts) at every position (every offset in a CSA
//     window, HCA window closes, window-ring wraps), rewound to every keep, continues as the
//     session that was fed only the kept tokens; with graph-captured steps, and eagerly issued on
//     one fixture;
//   - a step rewound again, to fewer tokens, does too; what cannot be undone is refused;
//   - greedy speculative decoding emits exactly the tokens of plain greedy decoding on the GPU,
//     k = 1..4, with scripted drafters (all right, all wrong, mixed) on every fixture and with the
//     CPU's MTP block on the MTP fixture (the GPU's: test_cuda_mtp.cpp); the verify steps' streams
//     match the CPU's.
// Tolerance of a rewound session's logits: 1e-3 * max(1, |logit|) against the one-token steps of
// a plain GPU run, the fp32 tolerance of test_cuda_forward.cpp. The kept tokens' rows come from a
// call of another size than the reference's one-token steps, and the kernels may round
// differently per call size; a wrong rollback (a stale window row, pending row, overlap half or
// entry) moves logits by far more. How many comparisons were bit-identical is printed.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>

#include "cuda/cuda_forward_util.h"
#include "cuda/cuda_speculative_util.h"
#include "frank/core/error.h"
#include "frank/cuda/cuda_verify_target.h"
#include "frank/engine/mtp_drafter.h"
#include "golden/fixture.h"
#include "golden/scripted_drafter.h"

namespace frank::test {
namespace {

using Logits = engine::Model::Logits;

Tensor row_of(const Tensor& t, int64_t r) {
  return Tensor({1, t.cols()}, std::vector<float>(t.row(r), t.row(r) + t.cols()));
}

// Logits of every position of `ids` fed one token per call (graph steps after the first).
Tensor one_token_steps(cuda::CudaModel& gpu, std::span<const int32_t> ids) {
  cuda::DeviceSession s = gpu.new_session();
  Tensor all({static_cast<int64_t>(ids.size()), gpu.model().config().vocab_size});
  for (size_t p = 0; p < ids.size(); ++p) {
    const Tensor row = gpu.forward(s, ids.subspan(p, 1), Logits::All);
    std::copy(row.data.begin(), row.data.end(), all.row(static_cast<int64_t>(p)));
  }
  return all;
}

// Checks the next token's logits of a rewound session at `position` against the plain run, then
// undoes that token (a rewind to nothing).
struct ProbeResult {
  Worst worst;
  bool identical;
};
ProbeResult probe(cuda::CudaModel& gpu, cuda::DeviceSession& s, std::span<const int32_t> ids, const Tensor& plain) {
  const int64_t p = s.position;
  const cuda::DeviceCheckpoint before = cuda::take_checkpoint(gpu, s, 1);
  const Tensor next = gpu.forward(s, ids.subspan(static_cast<size_t>(p), 1), Logits::All);
  cuda::rewind(gpu, s, before, 0);
  const Tensor want = row_of(plain, p);
  return {compare(next, want), std::memcmp(next.data.data(), want.data.data(), want.data.size() * sizeof(float)) == 0};
}

TEST(CudaRewind, KeepingAPrefixOfAVerifyCallEqualsFeedingOnlyIt) {
  REQUIRE_GPU();
  const auto dirs = fixture_dirs();
  for (const auto& dir : dirs)
    for (const bool graphs : {true, false}) {
      if (!graphs && dir != dirs.front()) continue;  // eager calls record and rewind the same way
      const Fixture f = load_fixture(dir);
      const auto model = load(dir);
      cuda::CudaModel gpu(*model, cuda::WeightType::F32, 0, {.enabled = graphs});
      const std::span<const int32_t> ids(f.ids);
      const int64_t n = std::ssize(ids);
      const Tensor plain = one_token_steps(gpu, ids);
      // Rejected drafts: tokens that differ from the sequence (they must leave no trace).
      std::vector<int32_t> wrong(ids.begin(), ids.end());
      for (auto& t : wrong) t = (t + 7) % static_cast<int32_t>(f.vocab);

      cuda::DeviceSession ran = gpu.new_session();
      double worst = 0;
      int64_t checked = 0, identical = 0;
      for (int64_t p = 0; p + 1 < n; ++p) {
        if (p > 0) gpu.forward(ran, ids.subspan(static_cast<size_t>(p - 1), 1), Logits::Last);
        for (int64_t call = 1; call <= 5 && p + call < n; ++call)
          for (int64_t keep = 0; keep <= call; ++keep) {
            std::vector<int32_t> fed(ids.begin() + p, ids.begin() + p + keep);
            fed.insert(fed.end(), wrong.begin() + p + keep, wrong.begin() + p + call);
            const cuda::DeviceCheckpoint before = cuda::take_checkpoint(gpu, ran, call);
            Tensor streams;
            gpu.verify(ran, fed, streams);
            cuda::rewind(gpu, ran, before, keep);
            ASSERT_EQ(ran.position, p + keep);
            const ProbeResult r = probe(gpu, ran, ids, plain);
            ASSERT_LE(r.worst.err, 1e-3) << f.name() << (graphs ? "" : " (eager)") << ": call of " << call << " at "
                                         << p << ", kept " << keep << ", logit " << r.worst.col;
            worst = std::max(worst, r.worst.err);
            identical += r.identical ? 1 : 0;
            ++checked;
            cuda::rewind(gpu, ran, before, 0);  // back to p for the next call
            ASSERT_EQ(ran.position, p);
          }
      }
      EXPECT_GT(checked, 5 * n) << f.name();
      std::cout << fmt::format("[ rewind ] {}{}: {} verify calls rewound, {} continued bit-identically, max scaled "
                               "|rewound - plain| = {:.3g}\n",
                               f.name(), graphs ? "" : " (eager)", checked, identical, worst);
    }
}

// A verify step rewound to its accepted drafts can be rewound again, to fewer (the request ended at
// an earlier emitted token).
TEST(CudaRewind, RewindingARewoundCallAgainKeepsFewer) {
  REQUIRE_GPU();
  const auto dir = fixture_dirs().front();
  const Fixture f = load_fixture(dir);
  const auto model = load(dir);
  cuda::CudaModel gpu(*model, cuda::WeightType::F32);
  const std::span<const int32_t> ids(f.ids);
  const Tensor plain = one_token_steps(gpu, ids);
  for (int64_t p = 1; p + 6 < std::ssize(ids); p += 3) {
    cuda::DeviceSession s = gpu.new_session();
    gpu.forward(s, ids.first(static_cast<size_t>(p)), Logits::Last);
    const cuda::DeviceCheckpoint before = cuda::take_checkpoint(gpu, s, 5);
    Tensor streams;
    gpu.verify(s, ids.subspan(static_cast<size_t>(p), 5), streams);
    for (int64_t keep = 5; keep >= 0; --keep) {
      cuda::rewind(gpu, s, before, keep);
      const ProbeResult r = probe(gpu, s, ids, plain);
      ASSERT_LE(r.worst.err, 1e-3) << f.name() << " at " << p << ": rewound again to " << keep;
    }
  }
}

TEST(CudaRewind, RefusesWhatItCannotUndo) {
  REQUIRE_GPU();
  const auto model = load(fixture_dirs().front());
  cuda::CudaModel gpu(*model, cuda::WeightType::F32);
  const std::vector<int32_t> ids(static_cast<size_t>(cuda::CudaModel::kGraphTokens) + 1, 3);
  const std::span<const int32_t> all(ids);
  Tensor streams;
  cuda::DeviceSession s = gpu.new_session();
  EXPECT_THROW(cuda::take_checkpoint(gpu, s, model->config().sliding_window + 1), Error);
  EXPECT_THROW(gpu.verify(s, all, streams), Error);  // more tokens than a call records
  const cuda::DeviceCheckpoint two = cuda::take_checkpoint(gpu, s, 2);
  gpu.verify(s, all.first(2), streams);
  EXPECT_THROW(cuda::rewind(gpu, s, two, 3), Error);  // keeps more than the call fed
  EXPECT_THROW(cuda::rewind(gpu, s, two, -1), Error);
  const cuda::DeviceCheckpoint one = cuda::take_checkpoint(gpu, s, 1);
  gpu.verify(s, all.first(2), streams);
  EXPECT_THROW(cuda::rewind(gpu, s, one, 1), Error);  // the call fed more than the checkpoint saved
  const cuda::DeviceCheckpoint plain = cuda::take_checkpoint(gpu, s, 1);
  gpu.forward(s, all.first(1), Logits::Last);
  EXPECT_THROW(cuda::rewind(gpu, s, plain, 1), Error);  // not a verify call: nothing recorded to replay
  EXPECT_NO_THROW(cuda::rewind(gpu, s, plain, 0));
  EXPECT_EQ(s.position, 4);
}

TEST(CudaSpeculative, GreedyEqualsPlainGreedyForEveryDrafter) {
  REQUIRE_GPU();
  const size_t prompt_length = 6, total = prompt_length + 48;  // crosses window closes and ring wraps
  for (const auto& dir : fixture_dirs()) {
    const Fixture f = load_fixture(dir);
    const auto model = load(dir);
    cuda::CudaModel gpu(*model, cuda::WeightType::F32);
    const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + prompt_length);
    const std::vector<int32_t> plain = plain_greedy(gpu, prompt, total);
    for (int k = 1; k <= 4; ++k)
      for (const auto& [name, wrong] : scripted_drafters()) {
        ScriptedDrafter drafter(plain, static_cast<int>(f.vocab), wrong);
        std::vector<int32_t> tokens = prompt;
        cuda::CudaVerifyTarget target(gpu);
        const auto st = speculative_greedy(target, drafter, k, tokens, total);
        ASSERT_EQ(tokens, plain) << f.name() << ": k = " << k << ", drafter " << name;
        if (std::string(name) == "right") {
          EXPECT_EQ(st.accepted, st.drafted) << f.name() << ", k = " << k;
        }
        if (std::string(name) == "wrong") {
          EXPECT_EQ(st.accepted, 0) << f.name() << ", k = " << k;
        }
      }
    std::cout << fmt::format("[ speculative ] {}: greedy with k = 1..4 and 3 drafters = plain greedy ({} tokens)\n",
                             f.name(), total - prompt_length);
  }
}

TEST(CudaSpeculative, MtpDraftedGreedyEqualsPlainGreedy) {
  REQUIRE_GPU();
  const auto dir = std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv4-mtp" / "tiny-v4-mtp";
  const auto model = load(dir);
  cuda::CudaModel gpu(*model, cuda::WeightType::F32);
  const auto ids = nlohmann::json::parse(std::ifstream(dir / "golden.json")).at("ids").get<std::vector<int32_t>>();
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 10);
  const size_t total = prompt.size() + 40;

  // The streams the drafter reads: a GPU verify call's against the CPU's.
  {
    engine::Session cpu = model->new_session();
    Tensor want;
    model->forward(cpu, prompt, Logits::All, &want);
    Tensor prefill, verified;
    cuda::DeviceSession t = gpu.new_session();
    gpu.forward(t, std::span<const int32_t>(prompt).first(5), Logits::Last, &prefill);
    gpu.verify(t, std::span<const int32_t>(prompt).subspan(5), verified);
    Tensor got({want.rows(), want.cols()});
    std::copy(prefill.data.begin(), prefill.data.end(), got.data.begin());
    std::copy(verified.data.begin(), verified.data.end(), got.data.begin() + static_cast<int64_t>(prefill.data.size()));
    const Worst w = compare(got, want);
    EXPECT_LE(w.err, 1e-3) << "streams of position " << w.row << ", value " << w.col;
  }

  const std::vector<int32_t> plain = plain_greedy(gpu, prompt, total);
  for (int k = 1; k <= 4; ++k) {
    engine::MtpDrafter drafter(*model);
    std::vector<int32_t> tokens = prompt;
    cuda::CudaVerifyTarget target(gpu);
    const auto st = speculative_greedy(target, drafter, k, tokens, total);
    ASSERT_EQ(tokens, plain) << "k = " << k;
    EXPECT_EQ(st.drafted, st.verify_steps * k);
    std::cout << fmt::format("[ mtp drafts on cuda ] k = {}: {} verify steps, {} of {} drafts accepted\n", k,
                             st.verify_steps, st.accepted, st.drafted);
  }
}

}  // namespace
}  // namespace frank::test
