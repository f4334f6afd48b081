// The prefix cache over device sessions (cuda/device_sessions.h, server/prefix_cached_sessions.h),
// on a GPU; skipped, saying so, without one.
//   - Resuming from every kind of reusable point — the exact end of a kept session, a checkpoint
//     inside an open compressor window, one right after a window close — gives the logits a fresh
//     prefill of the same tokens gives, within the fp32 tolerance of test_cuda_forward.cpp
//     (1e-3 x max(1, |logit|): both are GPU runs of the same tokens, chunked differently, each
//     within that tolerance of the CPU reference). Checked at every position of every golden
//     fixture (checkpoints downloaded from the device, restored on the host, uploaded), and through
//     the request layer's tiers (resident GPU session, prefix cache in host memory).
//   - A 10-turn conversation through the engine worker: each warm turn prefills exactly its new
//     tokens (counted, asserted); the time to first token of cold, warm-from-GPU and
//     warm-from-host turns is printed, not asserted.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>
#include <span>

#include "cuda/cuda_forward_util.h"
#include "frank/cuda/device_sessions.h"
#include "frank/cuda/session_transfer.h"
#include "frank/model/synthetic.h"
#include "frank/server/engine_worker.h"
#include "frank/server/prefix_cached_sessions.h"
#include "golden/fixture.h"
#include "unit/counting_sessions.h"

namespace frank::test {
namespace {

using Logits = engine::Model::Logits;
constexpr double kTolerance = 1e-3;  // test_cuda_forward.cpp's fp32 tolerance (see the header)

std::span<const int32_t> slice(const std::vector<int32_t>& ids, size_t from, size_t to) {
  return std::span<const int32_t>(ids).subspan(from, to - from);
}

// Largest scaled difference of `got` (rows from `first` on) against rows first.. of `want`.
double worst_from(const Tensor& got, const Tensor& want, int64_t first) {
  double worst = 0;
  for (int64_t r = 0; r < got.rows(); ++r)
    for (int64_t v = 0; v < got.cols(); ++v) {
      const double w = want.row(first + r)[v];
      worst = std::max(worst, std::abs(got.row(r)[v] - w) / std::max(1.0, std::abs(w)));
    }
  return worst;
}

// The smallest compression ratio among the model's compressed layers (its windows close most often).
int64_t smallest_ratio(const engine::Model& model) {
  int64_t ratio = 0;
  for (const auto& a : model.attention())
    if (a.compressor() && (ratio == 0 || a.compressor()->ratio() < ratio)) ratio = a.compressor()->ratio();
  return ratio;
}

bool same(const engine::CompressorCheckpoint& a, const engine::CompressorCheckpoint& b) {
  return a.pending_kv == b.pending_kv && a.pending_gate == b.pending_gate && a.pending == b.pending &&
         a.overlap_kv == b.overlap_kv && a.overlap_gate == b.overlap_gate && a.has_overlap == b.has_overlap &&
         a.n_entries == b.n_entries;
}
bool same(const engine::SessionCheckpoint& a, const engine::SessionCheckpoint& b) {
  if (a.position != b.position || a.layers.size() != b.layers.size()) return false;
  for (size_t l = 0; l < a.layers.size(); ++l)
    if (a.layers[l].window != b.layers[l].window || !same(a.layers[l].compressor, b.layers[l].compressor) ||
        !same(a.layers[l].indexer, b.layers[l].indexer))
      return false;
  return true;
}

TEST(CudaPrefixCache, ResumingFromEveryCheckpointEqualsAFreshPrefill) {
  REQUIRE_GPU();
  for (const auto& dir : fixture_dirs()) {
    const Fixture f = load_fixture(dir);
    const auto model = load(dir);
    cuda::CudaModel gpu(*model, cuda::WeightType::F32);
    const size_t n = f.ids.size();
    cuda::DeviceSession fresh_session = gpu.new_session();
    const Tensor fresh = gpu.forward(fresh_session, f.ids, Logits::All);

    // One session fed a token at a time, a checkpoint downloaded at every position (the same as
    // checkpointing the whole downloaded session, bit for bit); then the whole session (the later
    // state every checkpoint is restored from, and itself an exact end).
    cuda::DeviceSession ran = gpu.new_session();
    std::vector<engine::SessionCheckpoint> checkpoints;
    for (size_t p = 1; p < n; ++p) {
      gpu.forward(ran, slice(f.ids, p - 1, p), Logits::Last);
      checkpoints.push_back(cuda::download_checkpoint(gpu, ran));
      ASSERT_TRUE(same(checkpoints.back(), engine::take_checkpoint(cuda::download_session(gpu, ran))))
          << f.name() << ": the checkpoint downloaded at " << p << " is not the downloaded session's";
    }
    const engine::Session later = cuda::download_session(gpu, ran);

    const int64_t ratio = smallest_ratio(*model);
    ASSERT_GT(ratio, 1) << f.name() << " has no compressed layer";
    double worst_open = 0, worst_closed = 0;
    for (const auto& c : checkpoints) {
      cuda::DeviceSession resumed = cuda::upload_session(gpu, engine::restore_checkpoint(c, later));
      const Tensor rest = gpu.forward(resumed, slice(f.ids, static_cast<size_t>(c.position), n), Logits::All);
      const double err = worst_from(rest, fresh, c.position);
      EXPECT_LE(err, kTolerance) << f.name() << ": resumed from the checkpoint at " << c.position;
      double& worst = c.position % ratio == 0 ? worst_closed : worst_open;
      worst = std::max(worst, err);
    }
    cuda::DeviceSession end = cuda::upload_session(gpu, later);
    const double end_err = worst_from(gpu.forward(end, slice(f.ids, n - 1, n), Logits::All), fresh, n - 1);
    EXPECT_LE(end_err, kTolerance) << f.name() << ": resumed from the exact end";
    std::cout << fmt::format(
        "[ resume ] {}: checkpoints at 1..{} (ratio {}): inside an open window max scaled err {:.3g}, right after a "
        "close {:.3g}; exact end {:.3g}\n",
        f.name(), n - 1, ratio, worst_open, worst_closed, end_err);
  }
}

// Label value of a counter series in the metrics text (0 when absent).
double series(const server::Metrics& m, const std::string& name_and_labels) {
  const std::string text = m.render(), key = "\n" + name_and_labels + " ";
  const auto at = text.find(key);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + key.size()));
}

// The request layer: one resident GPU session and the prefix cache behind it, on tiny-v4 (CSA
// windows of 4, HCA of 16). A request opens the session for its prompt, runs the rest with
// checkpoints at `checkpoint_at`, and its last logits are compared with a fresh prefill's.
TEST(CudaPrefixCache, EachTierResumesAsAFreshPrefill) {
  REQUIRE_GPU();
  const Fixture f = load_fixture(fixture_root() / "tiny-v4");
  const auto model = load(f.dir);
  ASSERT_EQ(smallest_ratio(*model), 4) << "the cases below assume CSA windows of 4";
  cuda::CudaModel gpu(*model, cuda::WeightType::F32);
  cuda::DeviceSessions device(gpu);
  engine::PrefixCache cache(size_t{1} << 30);
  server::Metrics metrics;
  server::EngineWorker::declare_metrics(metrics);
  server::PrefixCachedSessions sessions(device, &cache, nullptr, metrics, 1);

  auto request = [&](const std::vector<int32_t>& prompt, const std::set<int64_t>& checkpoint_at, int64_t expected,
                     const std::string& what) {
    int64_t pos = sessions.open(prompt);
    EXPECT_EQ(pos, expected) << what;
    Tensor logits;
    while (pos < std::ssize(prompt)) {
      int64_t next = std::ssize(prompt);
      for (int64_t c : checkpoint_at)
        if (c > pos && c < next) next = c;
      logits = sessions.forward(slice(prompt, static_cast<size_t>(pos), static_cast<size_t>(next)));
      pos = next;
      sessions.checkpoint();
    }
    sessions.close(prompt);
    cuda::DeviceSession fresh = gpu.new_session();
    const Tensor want = gpu.forward(fresh, prompt, Logits::Last);
    const double err = worst_from(logits, want, 0);
    EXPECT_LE(err, kTolerance) << what;
    std::cout << fmt::format("[ tiers ] {:<46} resumed at {:>2}: max scaled err {:.3g}\n", what, expected, err);
  };
  auto fork_at = [&](size_t at, size_t length) {  // the fixture's ids, departing at `at`
    std::vector<int32_t> ids(f.ids.begin(), f.ids.begin() + static_cast<std::ptrdiff_t>(length));
    ids[at] = (ids[at] + 1) % static_cast<int32_t>(f.vocab);
    return ids;
  };
  auto first = [&](size_t length) { return std::vector<int32_t>(f.ids.begin(), f.ids.begin() + length); };

  request(first(11), {6, 8}, 0, "fresh (checkpoints at 6 and 8)");
  request(first(14), {}, 11, "exact end, resident on the GPU");
  request(fork_at(0, 9), {}, 0, "another conversation (evicts the first)");
  request(first(17), {}, 14, "exact end, from host memory (uploaded)");
  request(fork_at(7, 12), {}, 6, "checkpoint inside an open window (6 = 4 + 2)");
  request(fork_at(9, 12), {}, 8, "checkpoint right after a window close (8)");
  EXPECT_EQ(series(metrics, "frank_prefix_cache_hits_total{tier=\"gpu\"}"), 1);
  EXPECT_EQ(series(metrics, "frank_prefix_cache_hits_total{tier=\"host\"}"), 3);
  EXPECT_EQ(series(metrics, "frank_prefix_cache_misses_total"), 2);
}

std::vector<int32_t> random_tokens(size_t n, uint32_t seed, int vocab) {
  std::vector<int32_t> out(n);
  for (auto& t : out) t = static_cast<int32_t>((seed = seed * 1664525u + 1013904223u) >> 8) % vocab;
  return out;
}

// Seconds summed by the worker's time-to-first-token histogram for `cache` (warm or cold).
double ttft_sum(const server::Metrics& m, const char* cache) {
  return series(m, fmt::format("frank_time_to_first_token_seconds_sum{{cache=\"{}\"}}", cache));
}

// One way of serving the conversation: its sessions, metrics and worker.
struct Arm {
  Arm(cuda::DeviceSessions& device, const engine::Model& model, engine::PrefixCache* cache, size_t resident)
      : counting(device),
        sessions(counting, cache, nullptr, metrics, resident),
        worker(model, sessions, metrics, 1 << 16, 1024) {
    server::EngineWorker::declare_metrics(metrics);
  }
  // Runs a one-token request (the prefill only): its first token's log-probability, the prompt
  // tokens it reused, the tokens it prefilled and its time to first token.
  struct Turn {
    float logprob;
    int64_t cached, prefilled;
    double ttft;
  };
  Turn run(const std::vector<int32_t>& prompt) {
    server::GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = 1;
    r.sampling.temperature = 0;
    r.ignore_eos = true;
    r.top_logprobs = 0;
    server::Job job(std::move(r));
    const int64_t fed = counting.tokens_fed;
    const double before = ttft_sum(metrics, "warm") + ttft_sum(metrics, "cold");
    worker.execute(job);
    Turn t{0, 0, counting.tokens_fed - fed, ttft_sum(metrics, "warm") + ttft_sum(metrics, "cold") - before};
    while (auto e = job.next(std::chrono::milliseconds(0))) {
      if (auto* token = std::get_if<server::TokenEvent>(&*e)) t.logprob = token->logprob;
      if (auto* end = std::get_if<server::JobEnd>(&*e)) {
        EXPECT_EQ(end->finish_reason, "length") << end->error;
        t.cached = end->cached_tokens;
      }
    }
    return t;
  }
  server::Metrics metrics;
  CountingSessions counting;
  server::PrefixCachedSessions sessions;
  server::EngineWorker worker;
};

// An agent conversation of 10 turns, each the whole history plus a new message, served cold (no
// cache), warm from the resident GPU session, and warm from host memory (no resident session: each
// turn uploads its resume point). Warm turns prefill exactly the new message; their first token's
// log-probability matches the cold run's within 5e-3 x max(1, |logprob|) (a log-softmax of logits
// within the 1e-3 tolerance).
TEST(CudaPrefixCache, TenTurnConversationPrefillsOnlyNewTokens) {
  REQUIRE_GPU();
  auto m = model::synthetic_model("tiny", 3);
  engine::Model model(std::move(m.config), std::move(m.weights));
  cuda::CudaModel gpu(model, cuda::WeightType::F32);
  cuda::DeviceSessions device(gpu);
  engine::PrefixCache gpu_cache(size_t{1} << 30), host_cache(size_t{1} << 30);
  Arm cold(device, model, nullptr, 0), from_gpu(device, model, &gpu_cache, 1), from_host(device, model, &host_cache, 0);
  cold.run({1, 2, 3});  // the weights go to the GPU before anything is timed

  std::cout << "| turn | tokens | new | cached (gpu / host) | TTFT cold ms | warm gpu ms | warm host ms |\n";
  std::vector<int32_t> history;
  for (int turn = 0; turn < 10; ++turn) {
    const auto message = random_tokens(200 + 40 * static_cast<size_t>(turn), 100 + turn, 256);
    history.insert(history.end(), message.begin(), message.end());
    const Arm::Turn c = cold.run(history), g = from_gpu.run(history), h = from_host.run(history);
    // Each request consumed its prompt (its one token was never fed), so the next turn reuses it all.
    const int64_t reused = turn == 0 ? 0 : std::ssize(history) - std::ssize(message);
    EXPECT_EQ(c.cached, 0);
    EXPECT_EQ(c.prefilled, std::ssize(history));
    for (const Arm::Turn* warm : {&g, &h}) {
      EXPECT_EQ(warm->cached, reused) << "turn " << turn;
      EXPECT_EQ(warm->prefilled, std::ssize(history) - reused) << "turn " << turn;
      EXPECT_NEAR(warm->logprob, c.logprob, 5e-3 * std::max(1.0f, std::abs(c.logprob))) << "turn " << turn;
    }
    std::cout << fmt::format("| {:>4} | {:>6} | {:>3} | {:>8} / {:<8} | {:>12.2f} | {:>11.2f} | {:>12.2f} |\n", turn,
                             history.size(), message.size(), g.cached, h.cached, 1e3 * c.ttft, 1e3 * g.ttft,
                             1e3 * h.ttft);
  }
  EXPECT_EQ(series(from_gpu.metrics, "frank_prefix_cache_hits_total{tier=\"gpu\"}"), 9);
  EXPECT_EQ(series(from_host.metrics, "frank_prefix_cache_hits_total{tier=\"host\"}"), 9);
  EXPECT_EQ(from_gpu.counting.resumed, 0) << "continuing the resident session uploads nothing";
  EXPECT_EQ(from_host.counting.resumed, 9);
}

}  // namespace
}  // namespace frank::test
