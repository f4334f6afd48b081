// The engine worker on its two kinds of sessions, on the CPU: ContinuedSessions (what `frank serve
// --backend cuda` runs on, here over the CPU reference's SessionRunner) must give the tokens that
// fresh sessions give, reuse the previous session exactly when a prompt continues it, and drop it
// after a failure; the server refuses what device sessions cannot do yet.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <utility>

#include "frank/core/error.h"
#include "frank/model/synthetic.h"
#include "frank/model/tokenizer.h"
#include "frank/server/continued_sessions.h"
#include "frank/server/engine_worker.h"
#include "frank/server/http_server.h"
#include "frank/server/prefix_cached_sessions.h"
#include "tokenizer_test_util.h"

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

// A CPU session that fails (as a device error would) at its `fail_at`-th forward call.
class FailingRunner : public engine::SessionRunner {
 public:
  FailingRunner(const engine::Model& model, int fail_at) : inner_(model), fail_at_(fail_at) {}
  Tensor forward(std::span<const int32_t> ids, engine::Model::Logits logits) override {
    if (++calls_ == fail_at_) throw Error("CUDA: kernel launch: an illegal memory access was encountered");
    return inner_.forward(ids, logits);
  }

 private:
  engine::CpuRunner inner_;
  int fail_at_, calls_ = 0;
};

class RequestSessionsTest : public ::testing::Test {
 protected:
  RequestSessionsTest() {
    EngineWorker::declare_metrics(continued_metrics_);
    EngineWorker::declare_metrics(fresh_metrics_);
  }
  std::unique_ptr<engine::Model> model_ = tiny_model();
  int runners_made_ = 0;
  int fail_next_runner_at_ = 0;  // forward call at which the next runner made fails (0: never)
  Metrics continued_metrics_, fresh_metrics_;
  ContinuedSessions continued_{[this]() -> std::unique_ptr<engine::SessionRunner> {
    ++runners_made_;
    return std::make_unique<FailingRunner>(*model_, std::exchange(fail_next_runner_at_, 0));
  }};
  PrefixCachedSessions fresh_{*model_, nullptr, nullptr, fresh_metrics_};  // no cache: always a new session
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
  EXPECT_EQ(runners_made_, 1);

  // A longer prompt that departs from the session at its fourth token starts a fresh one.
  auto departs = concat(extended, second.tokens);
  departs[3] = (departs[3] + 1) % 256;
  const Outcome third = run(on_continued_, departs, 4);
  EXPECT_EQ(third.end.cached_tokens, 0);
  EXPECT_EQ(third.tokens, run(on_fresh_, departs, 4).tokens);
  EXPECT_EQ(runners_made_, 2);

  // A shorter prompt (the first again) starts a fresh one, and gives the first request's tokens.
  const Outcome fourth = run(on_continued_, prompt_, 6);
  EXPECT_EQ(fourth.end.cached_tokens, 0);
  EXPECT_EQ(fourth.tokens, first.tokens);
  EXPECT_EQ(runners_made_, 3);

  // Exactly the consumed tokens and nothing new: no token would run to give logits, so fresh.
  const auto consumed = concat(prompt_, std::vector<int32_t>(first.tokens.begin(), first.tokens.end() - 1));
  EXPECT_EQ(run(on_continued_, consumed, 2).end.cached_tokens, 0);
  EXPECT_EQ(runners_made_, 4);

  EXPECT_EQ(counter(continued_metrics_, "frank_prompt_tokens_cached_total"), second.end.cached_tokens);
  // Device sessions take no checkpoints: the counter never got a series.
  EXPECT_EQ(counter(continued_metrics_, "frank_prefix_checkpoints_total"), -1);
}

TEST_F(RequestSessionsTest, AFailedRequestDropsItsSessionAndTheNextStartsFresh) {
  // Forward calls: 1 prefill, then one per token fed; call 3 fails after two tokens were emitted
  // and the first of them was fed.
  fail_next_runner_at_ = 3;
  const Outcome failed = run(on_continued_, prompt_, 6);
  EXPECT_EQ(failed.end.finish_reason, "error");
  EXPECT_THAT(failed.end.error, ::testing::HasSubstr("illegal memory access"));
  ASSERT_EQ(failed.tokens.size(), 2u);  // tokens streamed before the failure stay sent
  EXPECT_EQ(runners_made_, 1);

  // This prompt begins with everything the failed session had consumed (the prompt and the first
  // token), so a kept session would be continued; the failed one was dropped, so it starts fresh.
  const auto retry = concat(prompt_, failed.tokens);
  const Outcome after = run(on_continued_, retry, 4);
  EXPECT_EQ(after.end.finish_reason, "length") << after.end.error;
  EXPECT_EQ(after.end.cached_tokens, 0);
  EXPECT_EQ(after.tokens, run(on_fresh_, retry, 4).tokens);
  EXPECT_EQ(runners_made_, 2);
}

TEST(DeviceServer, RefusesWhatDeviceSessionsCannotDoYet) {
  auto model = tiny_model();
  const auto tokenizer = model::Tokenizer::load(test::tokenizer_fixture_dir() / "tiny-flags" / "tokenizer.json");
  auto runners = [&model]() -> std::unique_ptr<engine::SessionRunner> {
    return std::make_unique<engine::CpuRunner>(*model);
  };
  auto expect_refused = [&](ServerOptions o, const std::string& option) {
    try {
      HttpServer server(*model, tokenizer, std::move(o), runners);
      ADD_FAILURE() << option << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(option + " works on the CPU backend only"));
    }
  };
  ServerOptions off;
  off.port = 0;
  off.prefix_cache_bytes = 0;
  off.draft_tokens = 0;
  ServerOptions o = off;
  o.prefix_cache_bytes = 1 << 20;
  expect_refused(o, "--prefix-cache-gb");
  o = off;
  o.prefix_cache_dir = "/tmp/never-made";
  expect_refused(o, "--prefix-cache-dir");
  o = off;
  o.draft_tokens = 3;
  expect_refused(o, "--draft-tokens");
  o = off;
  o.record_routing = "/tmp/never-made.trace";
  expect_refused(o, "--record-routing");
  EXPECT_NO_THROW({ HttpServer server(*model, tokenizer, off, runners); });
}

}  // namespace
}  // namespace frank::server
