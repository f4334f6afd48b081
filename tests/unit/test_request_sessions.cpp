// The engine worker on PrefixCachedSessions over the CPU reference's sessions, with the resident
// tier that `frank serve --backend cuda` keeps in GPU memory (here the same logic over host
// sessions): continued and resumed sessions give the tokens that fresh sessions give, prefill
// only the new tokens, each tier is used where it reaches furthest and counted, a failure drops the
// resident sessions; speculative decoding runs on the same sessions (rewound past rejected drafts,
// so a continued turn is exact); the server refuses what device sessions cannot do yet.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <utility>

#include "frank/core/error.h"
#include "frank/model/loader.h"
#include "frank/model/synthetic.h"
#include "frank/model/tokenizer.h"
#include "frank/server/engine_worker.h"
#include "frank/server/http_server.h"
#include "frank/server/prefix_cached_sessions.h"
#include "tokenizer_test_util.h"
#include "unit/counting_sessions.h"

namespace frank::server {
namespace {

std::unique_ptr<engine::Model> tiny_model() {
  auto m = model::synthetic_model("tiny", 11);
  return std::make_unique<engine::Model>(std::move(m.config), std::move(m.weights));
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  JobEnd end;
};

// Runs a greedy request of `max_tokens` on `worker` (synchronously, as the scheduler's thread does).
Outcome run(EngineWorker& worker, std::vector<int32_t> prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.top_logprobs = 0;
  Job job(std::move(r));
  worker.execute(job);
  Outcome o;
  while (auto e = job.next(std::chrono::milliseconds(0))) {
    if (auto* t = std::get_if<TokenEvent>(&*e)) {
      o.tokens.push_back(t->id);
      o.logprobs.push_back(t->logprob);
    } else {
      o.end = std::get<JobEnd>(*e);
    }
  }
  return o;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Value of an unlabelled counter in the Prometheus text.
double counter(const Metrics& m, const std::string& name) {
  const std::string text = m.render();
  const auto at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

class RequestSessionsTest : public ::testing::Test {
 protected:
  RequestSessionsTest() {
    EngineWorker::declare_metrics(continued_metrics_);
    EngineWorker::declare_metrics(fresh_metrics_);
  }
  std::unique_ptr<engine::Model> model_ = tiny_model();
  engine::HostSessions host_{*model_};
  test::CountingSessions backend_{host_};
  Metrics continued_metrics_, fresh_metrics_;
  // One resident session and no prefix cache: only the last conversation's end is reusable.
  PrefixCachedSessions continued_{backend_, nullptr, nullptr, continued_metrics_, 1};
  PrefixCachedSessions fresh_{host_, nullptr, nullptr, fresh_metrics_};  // no tier: always a new session
  EngineWorker on_continued_{*model_, continued_, continued_metrics_, 4096, 1024};
  EngineWorker on_fresh_{*model_, fresh_, fresh_metrics_, 4096, 1024};
  const std::vector<int32_t> prompt_{5, 17, 3, 99, 42, 7, 200, 12, 64, 31};
};

TEST_F(RequestSessionsTest, ContinuesExactlyWhenThePromptExtendsTheSession) {
  const Outcome first = run(on_continued_, prompt_, 6);
  ASSERT_EQ(first.end.finish_reason, "length") << first.end.error;
  EXPECT_EQ(first.end.cached_tokens, 0);
  EXPECT_EQ(first.tokens, run(on_fresh_, prompt_, 6).tokens);

  // The agentic case: the conversation so far (prompt and every generated token) plus new ones.
  // The session consumed the prompt and all generated tokens but the last (never fed).
  const auto extended = concat(concat(prompt_, first.tokens), {8, 9, 10});
  const Outcome second = run(on_continued_, extended, 5);
  const Outcome second_fresh = run(on_fresh_, extended, 5);
  ASSERT_EQ(second.end.finish_reason, "length") << second.end.error;
  EXPECT_EQ(second.end.cached_tokens, static_cast<int>(prompt_.size() + first.tokens.size() - 1));
  EXPECT_EQ(second_fresh.end.cached_tokens, 0);
  EXPECT_EQ(second.tokens, second_fresh.tokens);
  // The CPU reference accumulates in double and each position's arithmetic does not depend on how
  // the tokens were chunked, so a continued session matches a fresh one to float rounding.
  for (size_t i = 0; i < second.logprobs.size(); ++i) EXPECT_NEAR(second.logprobs[i], second_fresh.logprobs[i], 1e-5);
  EXPECT_EQ(backend_.fresh_made, 1);

  // A longer prompt that departs from the session at its fourth token starts a fresh one.
  auto departs = concat(extended, second.tokens);
  departs[3] = (departs[3] + 1) % 256;
  const Outcome third = run(on_continued_, departs, 4);
  EXPECT_EQ(third.end.cached_tokens, 0);
  EXPECT_EQ(third.tokens, run(on_fresh_, departs, 4).tokens);
  EXPECT_EQ(backend_.fresh_made, 2);

  // A shorter prompt (the first again) starts a fresh one, and gives the first request's tokens.
  const Outcome fourth = run(on_continued_, prompt_, 6);
  EXPECT_EQ(fourth.end.cached_tokens, 0);
  EXPECT_EQ(fourth.tokens, first.tokens);
  EXPECT_EQ(backend_.fresh_made, 3);

  // Exactly the consumed tokens and nothing new: no token would run to give logits, so fresh.
  const auto consumed = concat(prompt_, std::vector<int32_t>(first.tokens.begin(), first.tokens.end() - 1));
  EXPECT_EQ(run(on_continued_, consumed, 2).end.cached_tokens, 0);
  EXPECT_EQ(backend_.fresh_made, 4);

  EXPECT_EQ(counter(continued_metrics_, "frank_prompt_tokens_cached_total"), second.end.cached_tokens);
  // Without a prefix cache or store no checkpoints are taken (nothing would keep them).
  EXPECT_EQ(counter(continued_metrics_, "frank_prefix_checkpoints_total"), -1);
}

TEST_F(RequestSessionsTest, AFailedRequestDropsItsSessionAndTheNextStartsFresh) {
  // Forward calls: 1 prefill, then one per token fed; call 3 fails after two tokens were emitted
  // and the first of them was fed.
  backend_.fail_next_at = 3;
  const Outcome failed = run(on_continued_, prompt_, 6);
  EXPECT_EQ(failed.end.finish_reason, "error");
  EXPECT_THAT(failed.end.error, ::testing::HasSubstr("illegal memory access"));
  ASSERT_EQ(failed.tokens.size(), 2u);  // tokens streamed before the failure stay sent
  EXPECT_EQ(backend_.fresh_made, 1);

  // This prompt begins with everything the failed session had consumed (the prompt and the first
  // token), so a kept session would be continued; the failed one was dropped, so it starts fresh.
  const auto retry = concat(prompt_, failed.tokens);
  const Outcome after = run(on_continued_, retry, 4);
  EXPECT_EQ(after.end.finish_reason, "length") << after.end.error;
  EXPECT_EQ(after.end.cached_tokens, 0);
  EXPECT_EQ(after.tokens, run(on_fresh_, retry, 4).tokens);
  EXPECT_EQ(backend_.fresh_made, 2);
}

// Value of a counter series with one label, e.g. frank_prefix_cache_hits_total{tier="gpu"} (0 when absent).
double labelled(const Metrics& m, const std::string& name, const std::string& label) {
  const std::string text = m.render(), series = "\n" + name + "{" + label + "} ";
  const auto at = text.find(series);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + series.size()));
}

// Two conversations, one resident session and the prefix cache behind it. A turn whose
// conversation is resident continues it (tier gpu); one whose conversation left the resident tier
// resumes from the prefix cache (tier host: its end, moved to the backend); a prompt that departs
// inside a conversation resumes from the checkpoint before the fork (host). Every turn prefills
// exactly its new tokens and gives a fresh session's tokens.
TEST_F(RequestSessionsTest, EachTurnResumesFromTheTierThatReachesFurthest) {
  engine::PrefixCache cache(size_t{1} << 30);
  Metrics metrics;
  EngineWorker::declare_metrics(metrics);
  PrefixCachedSessions tiered(backend_, &cache, nullptr, metrics, 1);
  EngineWorker worker(*model_, tiered, metrics, 4096, 4);  // checkpoints every 4 tokens and at prompt ends
  auto turn = [&](const std::vector<int32_t>& prompt, int64_t cached, const std::string& what) {
    const int64_t fed_before = backend_.tokens_fed;
    const Outcome o = run(worker, prompt, 3);
    EXPECT_EQ(o.end.finish_reason, "length") << what << ": " << o.end.error;
    EXPECT_EQ(o.end.cached_tokens, cached) << what;
    // The new prompt tokens, then the first two completion tokens (the third is never fed).
    EXPECT_EQ(backend_.tokens_fed - fed_before, std::ssize(prompt) - cached + 2) << what;
    EXPECT_EQ(o.tokens, run(on_fresh_, prompt, 3).tokens) << what;
    return concat(prompt, {o.tokens[0], o.tokens[1]});  // what the session consumed
  };
  const std::vector<int32_t> b{90, 91, 92, 93, 94, 95, 96, 97, 98, 99};
  const auto a1 = turn(prompt_, 0, "A, first turn");
  const auto b1 = turn(b, 0, "B, first turn");  // A leaves the resident tier
  EXPECT_EQ(backend_.resumed, 0);
  const auto a2 = turn(concat(a1, {1, 2, 3}), std::ssize(a1), "A, from the prefix cache");
  EXPECT_EQ(backend_.resumed, 1);
  turn(concat(a2, {4}), std::ssize(a2), "A, resident");
  EXPECT_EQ(backend_.resumed, 1);
  auto fork = b;
  fork[5] += 1;  // B's checkpoints: 4, 8, its prompt's end 10
  turn(fork, 4, "B departing at token 5, from checkpoint 4");
  EXPECT_EQ(backend_.resumed, 2);
  EXPECT_EQ(backend_.fresh_made, 2);

  EXPECT_EQ(labelled(metrics, "frank_prefix_cache_hits_total", "tier=\"gpu\""), 1);
  EXPECT_EQ(labelled(metrics, "frank_prefix_cache_hits_total", "tier=\"host\""), 2);
  EXPECT_EQ(labelled(metrics, "frank_prefix_cache_hit_tokens_total", "tier=\"host\""), std::ssize(a1) + 4);
  EXPECT_EQ(labelled(metrics, "frank_prefix_cache_hit_tokens_total", "tier=\"gpu\""), std::ssize(a2));
  EXPECT_EQ(counter(metrics, "frank_prefix_cache_misses_total"), 2);
  // Resident evictions: A (by B), B (by A's second turn), A (by the fork).
  EXPECT_EQ(counter(metrics, "frank_gpu_session_evictions_total"), 3);
  EXPECT_EQ(tiered.resident_sessions(), 1u);
}

// Speculative decoding over RequestSessions::speculation, as `frank serve --backend cuda` runs it
// (one resident session, no prefix cache; here over host sessions), on the MTP fixture: for k = 1
// and 3, greedy requests give the plain worker's tokens; a turn continuing the conversation
// resumes the session the verify steps left (rewound past every rejected draft) and still gives
// the plain tokens; the verify steps and drafts are counted.
TEST(SpeculativeSessions, DraftedTurnsEqualPlainOnesAndContinueExactly) {
  auto loaded = model::load_model(std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv4-mtp" / "tiny-v4-mtp");
  const engine::Model model(std::move(loaded.config), std::move(loaded.weights));
  engine::HostSessions host(model);
  Metrics plain_metrics;
  EngineWorker::declare_metrics(plain_metrics);
  PrefixCachedSessions fresh(host, nullptr, nullptr, plain_metrics);
  EngineWorker plain(model, fresh, plain_metrics, 4096, 1024, {}, 0);
  const std::vector<int32_t> prompt{5, 17, 3, 99, 42, 7, 200, 12, 64, 31};
  for (const int k : {1, 3}) {
    Metrics metrics;
    EngineWorker::declare_metrics(metrics);
    PrefixCachedSessions sessions(host, nullptr, nullptr, metrics, 1);
    EngineWorker drafting(model, sessions, metrics, 4096, 1024, {}, k);
    const Outcome first = run(drafting, prompt, 13), first_plain = run(plain, prompt, 13);
    ASSERT_EQ(first.end.finish_reason, "length") << first.end.error;
    EXPECT_EQ(first.tokens, first_plain.tokens) << "k = " << k;
    const auto extended = concat(concat(prompt, first.tokens), {8, 9});
    const Outcome second = run(drafting, extended, 11), second_plain = run(plain, extended, 11);
    ASSERT_EQ(second.end.finish_reason, "length") << second.end.error;
    // A verify step feeds every token it emits (the drawn one and the accepted drafts), so the
    // session consumed the whole completion, unlike plain decoding's (whose last token is unfed).
    EXPECT_EQ(second.end.cached_tokens, static_cast<int>(prompt.size() + first.tokens.size())) << "k = " << k;
    EXPECT_EQ(second.tokens, second_plain.tokens) << "k = " << k;
    // As in ContinuesExactlyWhenThePromptExtendsTheSession: the CPU reference's positions do not
    // depend on how tokens were grouped into calls (verify steps here), so only float rounding.
    for (size_t i = 0; i < second.logprobs.size(); ++i)
      EXPECT_NEAR(second.logprobs[i], second_plain.logprobs[i], 1e-5) << "k = " << k << ", token " << i;
    const double steps = counter(metrics, "frank_verify_steps_total");
    const double drafted = counter(metrics, "frank_draft_tokens_total");
    const double accepted = counter(metrics, "frank_draft_tokens_accepted_total");
    EXPECT_GT(steps, 0);
    EXPECT_GT(drafted, 0);
    EXPECT_LE(accepted, drafted);
    // Every completion token comes from a verify step: its first token and its accepted drafts.
    EXPECT_EQ(steps + accepted, 13 + 11) << "k = " << k;
    std::cout << fmt::format("k = {}: {} verify steps, {} of {} drafts accepted\n", k, steps, accepted, drafted);
  }
  EXPECT_EQ(counter(plain_metrics, "frank_verify_steps_total"), -1);
}

TEST(DeviceServer, RefusesWhatDeviceSessionsCannotDoYet) {
  auto model = tiny_model();
  const auto tokenizer = model::Tokenizer::load(test::tokenizer_fixture_dir() / "tiny-flags" / "tokenizer.json");
  engine::HostSessions device(*model);  // stands for the CUDA backend's sessions
  auto expect_refused = [&](ServerOptions o, const std::string& option) {
    try {
      HttpServer server(*model, tokenizer, std::move(o), &device);
      ADD_FAILURE() << option << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(option + " works on the CPU backend only"));
    }
  };
  ServerOptions off;
  off.port = 0;
  off.draft_tokens = 0;
  ServerOptions o = off;
  o.record_routing = "/tmp/never-made.trace";
  expect_refused(o, "--record-routing");
  // The prefix cache, on disk too, and speculative decoding work on device sessions.
  o = off;
  o.prefix_cache_dir = (std::filesystem::temp_directory_path() / "frank-device-server-store").string();
  o.draft_tokens = 3;
  EXPECT_NO_THROW({ HttpServer server(*model, tokenizer, o, &device); });
  std::filesystem::remove_all(o.prefix_cache_dir);
}

}  // namespace
}  // namespace frank::server
