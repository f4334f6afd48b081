#pragma once
// A Job is one generation request travelling between an HTTP handler thread (which submits it and
// consumes its events) and the engine worker (which runs it and produces them).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "frank/engine/sampling.h"

namespace frank::server {

using Clock = std::chrono::steady_clock;

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  engine::SamplingParams sampling;
  std::vector<int32_t> forced_completion;  // extension: emit exactly these ids (run through the model)
  bool ignore_eos = false;
  int top_logprobs = -1;  // -1: no logprobs; 0..20: logprob of the chosen token and that many alternatives
  std::optional<Clock::time_point> deadline;
  // Positions where the next request of the same conversation is likely to part from this one
  // (message boundaries); the prefix cache takes checkpoints there.
  std::vector<int64_t> message_boundaries;
};

struct TokenEvent {
  int32_t id;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

struct JobEnd {
  std::string finish_reason;  // stop | length | cancelled | timeout | error
  std::string error;          // for finish_reason error
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
};

using JobEvent = std::variant<TokenEvent, JobEnd>;

class Job {
 public:
  // Why the consumer asked the worker to stop early.
  enum class StopRequest { None, Satisfied, ClientGone };

  explicit Job(GenerationRequest r) : request(std::move(r)), enqueued(Clock::now()) {}

  const GenerationRequest request;
  const Clock::time_point enqueued;

  // Consumer side.
  void request_stop(StopRequest why) { stop_.store(why); }
  // Next event, or nullopt when none arrived within `timeout`.
  std::optional<JobEvent> next(std::chrono::milliseconds timeout);

  // Worker side.
  StopRequest stop_requested() const { return stop_.load(); }
  void push(JobEvent e);

 private:
  std::atomic<StopRequest> stop_{StopRequest::None};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<JobEvent> events_;
};

}  // namespace frank::server
