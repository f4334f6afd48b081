// `frank serve --backend cuda` against `frank serve` on the CPU reference, both started as a user
// starts them, on the golden fixture tiny-v4 (fp32 weights): greedy completions of the same
// prompts must be the same tokens, including requests that continue a conversation from each tier
// of the prefix cache (a session resident on the GPU, the host memory cache, the disk store after
// a restart: only their new tokens run) and ones that do not (a fresh session).
// Skipped, saying so, without a CUDA device. Needs the `frank` binary built with -DFRANK_CUDA=ON:
// $FRANK_BINARY, else `frank` beside this test's executable (scripts/gpu-check's layout), else the
// build tree's. Run from the repository root (the fixture path is relative).
//
// Tolerances: fp32 weights, as test_cuda_forward.cpp: logits within 1e-3 x max(1, |logit|) of the
// CPU's (measured near 1e-5). Greedy tokens may then part only where the CPU's top two
// log-probabilities are closer than 1e-2 (a near-tie that rounding may flip); the comparison stops
// there and says so. A chosen token's log-probability is a logit minus the log-sum-exp of all,
// each within that tolerance: 5e-3 x max(1, |logprob|) leaves rounding room.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "cuda/cuda_serve_util.h"
#include "golden/fixture.h"

namespace frank::test {
namespace {

using namespace serve;

// The CUDA completion against the CPU's: the same tokens up to a near-tie, the log-probabilities
// within tolerance. Returns how many tokens were compared.
size_t expect_same(const Completion& cuda, const Completion& cpu, const std::string& what) {
  EXPECT_EQ(cuda.ids.size(), cpu.ids.size()) << what;
  double worst = 0;
  size_t i = 0;
  for (; i < std::min(cuda.ids.size(), cpu.ids.size()); ++i) {
    if (cuda.ids[i] != cpu.ids[i]) {
      EXPECT_LT(cpu.top2_gap[i], 1e-2) << what << ": token " << i << " is " << cuda.ids[i] << " on CUDA, "
                                       << cpu.ids[i] << " on the CPU, whose top-2 gap is " << cpu.top2_gap[i];
      std::cout << fmt::format("{}: near-tie at token {} (CPU top-2 gap {:.3g}); compared no further\n", what, i,
                               cpu.top2_gap[i]);
      break;
    }
    const double err = std::abs(cuda.logprobs[i] - cpu.logprobs[i]) / std::max(1.0, std::abs(cpu.logprobs[i]));
    worst = std::max(worst, err);
    EXPECT_LE(err, 5e-3) << what << ": token " << i << " logprob " << cuda.logprobs[i] << " vs " << cpu.logprobs[i];
  }
  std::cout << fmt::format("| {:<26} | {:>6} | {:>13} | {:>8} | {:>12.3g} |\n", what, cuda.ids.size(),
                           cuda.cached_tokens, i == cpu.ids.size() ? "yes" : fmt::format("{} of {}", i, cpu.ids.size()),
                           worst);
  return i;
}

TEST(CudaServe, GreedyCompletionsEqualTheCpuServersAndContinuedSessionsAreReused) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine: `frank serve --backend cuda` is not checked here";
  ASSERT_TRUE(fs::exists(frank_binary())) << frank_binary() << " not found (set FRANK_BINARY)";
  const fs::path fixture = fixture_root() / "tiny-v4";
  const Fixture f = load_fixture(fixture);
  const fs::path tmp = fs::temp_directory_path() / fmt::format("frank-cuda-serve-{}", getpid());
  fs::create_directories(tmp);
  const std::string common =
      fmt::format("--model {} --tokenizer {} --ctx 512", fixture.string(), write_byte_tokenizer(tmp).string());
  Server cpu(common, tmp / "cpu.log");
  Server cuda(common + " --backend cuda --weights-dtype fp32", tmp / "cuda.log");

  std::cout << "| request                    | tokens | cached (cuda) | same ids | max logprob err |\n";
  // 1. A fresh session.
  const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + 8);
  const Completion first = complete(cuda, prompt, 12);
  const Completion cpu_first = complete(cpu, prompt, 12);
  EXPECT_EQ(first.cached_tokens, 0);
  expect_same(first, cpu_first, "1 fresh");

  // 2. The conversation so far plus new tokens: the session (the prompt and every completion token
  //    but the last, which was never fed) continues; only the rest runs.
  const auto extended = concat(concat(prompt, first.ids), {f.ids[8], f.ids[9], f.ids[10]});
  const Completion second = complete(cuda, extended, 10);
  EXPECT_EQ(second.cached_tokens, static_cast<int>(prompt.size() + first.ids.size() - 1));
  expect_same(second, complete(cpu, extended, 10), "2 continues 1");

  // 3. Once more on top of that.
  const auto again = concat(concat(extended, second.ids), {f.ids[11]});
  const Completion third = complete(cuda, again, 8);
  EXPECT_EQ(third.cached_tokens, static_cast<int>(extended.size() + second.ids.size() - 1));
  expect_same(third, complete(cpu, again, 8), "3 continues 2");

  // 4. A prompt that departs from the session at its sixth token: a fresh session.
  auto departs = prompt;
  departs[5] = (departs[5] + 1) % static_cast<int32_t>(f.vocab);
  const Completion fourth = complete(cuda, departs, 12);
  EXPECT_EQ(fourth.cached_tokens, 0);
  expect_same(fourth, complete(cpu, departs, 12), "4 departs (fresh)");

  // 5. The first prompt again: fresh as well (no kept conversation is a shorter prefix of it, and
  //    no checkpoint lies before its last token).
  const Completion fifth = complete(cuda, prompt, 12);
  EXPECT_EQ(fifth.cached_tokens, 0);
  expect_same(fifth, cpu_first, "5 = 1 again (fresh)");

  // Reuse is reported as the CPU prefix cache reports its hits.
  EXPECT_EQ(metric(cuda, "frank_prompt_tokens_cached_total"), second.cached_tokens + third.cached_tokens);
  EXPECT_EQ(metric(cuda, "frank_prompt_tokens_total"),
            static_cast<double>(prompt.size() * 2 + extended.size() + again.size() + departs.size()));

  const std::string cuda_end = cuda.process->stop();
  EXPECT_EQ(cuda_end, "exit 0") << cuda.process->log_tail();
  cpu.process->stop();
  fs::remove_all(tmp);
}

// --weights-dtype bf16 (the default): the server runs, and a continued session gives what a fresh
// session gives for the same prompt (same weights and kernels; only the chunking of the prompt
// differs, so the same near-tie rule and tolerance apply, the fresh run standing for the CPU).
// One resident session and no host cache, so that another prompt leaves nothing to resume.
TEST(CudaServe, Bf16ContinuedSessionEqualsAFreshOne) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine: `frank serve --backend cuda` is not checked here";
  const fs::path fixture = fixture_root() / "tiny-v4";
  const Fixture f = load_fixture(fixture);
  const fs::path tmp = fs::temp_directory_path() / fmt::format("frank-cuda-serve-bf16-{}", getpid());
  fs::create_directories(tmp);
  Server cuda(fmt::format("--model {} --tokenizer {} --ctx 512 --backend cuda --gpu-sessions 1 --prefix-cache-gb 0",
                          fixture.string(),
                          write_byte_tokenizer(tmp).string()),
              tmp / "cuda.log");
  const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + 8);
  const Completion first = complete(cuda, prompt, 12);
  const auto extended = concat(concat(prompt, first.ids), {f.ids[8], f.ids[9]});
  const Completion continued = complete(cuda, extended, 10);
  EXPECT_EQ(continued.cached_tokens, static_cast<int>(prompt.size() + first.ids.size() - 1));
  complete(cuda, {f.ids[3]}, 1);  // another prompt: the next request starts fresh
  const Completion fresh = complete(cuda, extended, 10);
  EXPECT_EQ(fresh.cached_tokens, 0);
  std::cout << "| request                    | tokens | cached (cuda) | same ids | max logprob err |\n";
  expect_same(continued, fresh, "bf16 continued vs fresh");
  cuda.process->stop();
  fs::remove_all(tmp);
}

// `--plan` with a third of tiny-v4's routed experts on the CPU (the default ordering, written by
// `frank plan default`) and 4 GPU cache slots: the same greedy tokens as the CPU server, and
// /metrics exports the GPU expert cache's counters, which add up: every step is counted, some
// routings reached CPU-homed experts, copies were made, and the prompt repeated hits them.
TEST(CudaServe, AHybridServerWithCacheSlotsExportsItsCounters) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine: `frank serve --backend cuda` is not checked here";
  const fs::path fixture = fixture_root() / "tiny-v4";
  const Fixture f = load_fixture(fixture);
  const fs::path tmp = fs::temp_directory_path() / fmt::format("frank-cuda-serve-cache-{}", getpid());
  fs::create_directories(tmp);
  const fs::path plan = tmp / "plan.json";
  const std::string write_plan = fmt::format("{} plan default --cpu-experts 16 --layers 6 --experts 8 --top-k 2 --out {} "
                                             ">/dev/null",
                                             frank_binary().string(), plan.string());
  ASSERT_EQ(std::system(write_plan.c_str()), 0) << write_plan;
  const std::string common = fmt::format("--model {} --tokenizer {} --ctx 512 --prefix-cache-gb 0", fixture.string(),
                                         write_byte_tokenizer(tmp).string());
  Server cpu(common, tmp / "cpu.log");
  Server hybrid(common + fmt::format(" --backend cuda --weights-dtype fp32 --gpu-sessions 0 --plan {} "
                                     "--expert-cache-slots 4",
                                     plan.string()),
                tmp / "hybrid.log");
  const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + 8);
  std::cout << "| request                    | tokens | cached (cuda) | same ids | max logprob err |\n";
  const Completion want = complete(cpu, prompt, 12);
  expect_same(complete(hybrid, prompt, 12), want, "hybrid, first");
  const double misses_before = metric(hybrid, "frank_expert_cache_miss_routings_total");
  const double hits_before = metric(hybrid, "frank_expert_cache_hit_routings_total");
  expect_same(complete(hybrid, prompt, 12), want, "hybrid, repeated");

  const double steps = metric(hybrid, "frank_expert_cache_steps_total");
  const double hits = metric(hybrid, "frank_expert_cache_hit_routings_total");
  const double misses = metric(hybrid, "frank_expert_cache_miss_routings_total");
  const double zero_miss = metric(hybrid, "frank_expert_cache_zero_miss_steps_total");
  const double fills = metric(hybrid, "frank_expert_cache_fills_total");
  const double evictions = metric(hybrid, "frank_expert_cache_evictions_total");
  std::cout << fmt::format("hybrid server: {} steps, {} hit and {} missed routings, {} zero-miss steps, {} fills, {} "
                           "evictions\n",
                           steps, hits, misses, zero_miss, fills, evictions);
  EXPECT_GT(steps, 0);
  EXPECT_GT(hits + misses, 0);  // every step routes each token to 2 experts in 6 layers, a third CPU-homed
  EXPECT_LE(zero_miss, steps);
  EXPECT_GT(fills, 0);
  EXPECT_LE(evictions, fills);
  EXPECT_GT(hits, hits_before) << "the repeated prompt found no copy";
  EXPECT_GE(misses, misses_before);
  hybrid.process->stop();
  cpu.process->stop();
  fs::remove_all(tmp);
}

// The prefix cache's tiers on `--backend cuda --gpu-sessions 1 --prefix-cache-dir DIR`: two
// conversations alternate, so each continuation finds its conversation in host memory (uploaded),
// not resident; after a restart the disk store resumes it. The completions equal the CPU server's.
TEST(CudaServe, ConversationsResumeFromHostMemoryAndDiskAsOnTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine: `frank serve --backend cuda` is not checked here";
  const fs::path fixture = fixture_root() / "tiny-v4";
  const Fixture f = load_fixture(fixture);
  const fs::path tmp = fs::temp_directory_path() / fmt::format("frank-cuda-serve-tiers-{}", getpid());
  fs::create_directories(tmp / "store");
  const std::string common =
      fmt::format("--model {} --tokenizer {} --ctx 512", fixture.string(), write_byte_tokenizer(tmp).string());
  const std::string on_cuda =
      common + fmt::format(" --backend cuda --weights-dtype fp32 --gpu-sessions 1 --prefix-cache-dir {}",
                           (tmp / "store").string());
  Server cpu(common, tmp / "cpu.log");
  auto cuda = std::make_unique<Server>(on_cuda, tmp / "cuda.log");

  std::cout << "| request                    | tokens | cached (cuda) | same ids | max logprob err |\n";
  const std::vector<int32_t> a(f.ids.begin(), f.ids.begin() + 8), b(f.ids.begin() + 20, f.ids.begin() + 30);
  const Completion a1 = complete(*cuda, a, 6);
  expect_same(a1, complete(cpu, a, 6), "A fresh");
  const Completion b1 = complete(*cuda, b, 6);  // A leaves the GPU
  expect_same(b1, complete(cpu, b, 6), "B fresh");
  const auto a2_prompt = concat(concat(a, a1.ids), {f.ids[8], f.ids[9]});
  const Completion a2 = complete(*cuda, a2_prompt, 6);
  EXPECT_EQ(a2.cached_tokens, static_cast<int>(a.size() + a1.ids.size() - 1));
  expect_same(a2, complete(cpu, a2_prompt, 6), "A continued from host");
  const auto b2_prompt = concat(concat(b, b1.ids), {f.ids[30]});
  const Completion b2 = complete(*cuda, b2_prompt, 6);
  EXPECT_EQ(b2.cached_tokens, static_cast<int>(b.size() + b1.ids.size() - 1));
  expect_same(b2, complete(cpu, b2_prompt, 6), "B continued from host");
  const auto b3_prompt = concat(concat(b2_prompt, b2.ids), {f.ids[31]});
  const Completion b3 = complete(*cuda, b3_prompt, 6);
  EXPECT_EQ(b3.cached_tokens, static_cast<int>(b2_prompt.size() + b2.ids.size() - 1));
  expect_same(b3, complete(cpu, b3_prompt, 6), "B continued on the GPU");
  EXPECT_EQ(labelled(*cuda, "frank_prefix_cache_hits_total{tier=\"host\"}"), 2);
  EXPECT_EQ(labelled(*cuda, "frank_prefix_cache_hits_total{tier=\"gpu\"}"), 1);
  EXPECT_EQ(labelled(*cuda, "frank_prefix_cache_misses_total"), 2);

  // A restarted server resumes A from the disk store.
  EXPECT_EQ(cuda->process->stop(), "exit 0") << cuda->process->log_tail();
  cuda = std::make_unique<Server>(on_cuda, tmp / "cuda-restarted.log");
  const auto a3_prompt = concat(concat(a2_prompt, a2.ids), {f.ids[10]});
  const Completion a3 = complete(*cuda, a3_prompt, 6);
  EXPECT_EQ(a3.cached_tokens, static_cast<int>(a2_prompt.size() + a2.ids.size() - 1));
  expect_same(a3, complete(cpu, a3_prompt, 6), "A continued from disk");
  EXPECT_EQ(labelled(*cuda, "frank_prefix_cache_hits_total{tier=\"disk\"}"), 1);
  cuda->process->stop();
  cpu.process->stop();
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace frank::test
