#include "frank/server/engine_worker.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>

#include "frank/core/error.h"
#include "frank/core/splitmix64.h"

namespace frank::server {
namespace {

// Prompt chunk per forward call: bounds the time between two stop/deadline checks during prefill.
constexpr int64_t kPrefillChunk = 256;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The offset --debug-logit-noise adds to logit `token` at `position`: a SplitMix64 hash of both,
// mapped to [-amplitude, amplitude]. Fixed per position, so a perturbed arm is still deterministic
// (its A/A comparison shows no difference) while differing from an unperturbed one.
void perturb_logits(std::span<float> logits, int64_t position, double amplitude) {
  for (size_t token = 0; token < logits.size(); ++token) {
    const uint64_t z = splitmix64_finalize(((static_cast<uint64_t>(position) << 32) ^ token) + 0x9e3779b97f4a7c15ULL);
    const double unit = static_cast<double>(z >> 11) * 0x1.0p-53;  // [0, 1)
    logits[token] += static_cast<float>(amplitude * (2 * unit - 1));
  }
}

// Model log-probabilities (of the raw logits, independent of the sampling temperature).
TokenEvent token_event(std::span<const float> logits, int32_t id, int top) {
  TokenEvent e{id, 0.0f, {}};
  if (top < 0) return e;
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  const double log_z = mx + std::log(sum);
  e.logprob = static_cast<float>(logits[id] - log_z);
  if (top > 0) {
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    const auto k = std::min<size_t>(static_cast<size_t>(top), order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
    for (size_t i = 0; i < k; ++i) e.top_logprobs.emplace_back(order[i], static_cast<float>(logits[order[i]] - log_z));
  }
  return e;
}

}  // namespace

void EngineWorker::declare_metrics(Metrics& m) {
  const std::vector<double> latency{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
  m.declare_counter("frank_requests_total", "Requests by outcome (stop, length, cancelled, timeout, error, rejected)");
  m.declare_histogram("frank_queue_wait_seconds", "Time a request waited in the queue before it started", latency);
  m.declare_counter("frank_prompt_tokens_total", "Prompt tokens of executed requests");
  m.declare_counter("frank_prompt_tokens_cached_total",
                    "Prompt tokens not run again: resumed from a kept session or checkpoint (any tier)");
  m.declare_counter("frank_generated_tokens_total", "Generated (completion) tokens");
  m.declare_histogram("frank_time_to_first_token_seconds", "From start of execution to the first token (label cache)",
                      latency);
  m.declare_histogram("frank_decode_seconds_per_token", "Decode time per output token after the first, per request",
                      latency);
  m.declare_counter("frank_steps_total", "Forward steps (prefill chunks and decode steps)");
  m.declare_counter("frank_verify_steps_total", "Speculative verify steps (0 without speculative decoding)");
  m.declare_histogram("frank_tokens_per_verify_step", "Tokens accepted per verify step", {1, 2, 3, 4, 5, 6, 8});
  m.declare_histogram("frank_verify_step_seconds", "Time per verify step", latency);
  m.declare_counter("frank_draft_tokens_total", "Tokens the MTP block drafted");
  m.declare_histogram("frank_verify_step_draft_tokens", "Tokens drafted per verify step (varies with --draft-tokens auto)",
                      {0, 1, 2, 3, 4, 6, 8, 16});
  m.declare_histogram("frank_verify_step_experts",
                      "Distinct routed experts a verify step touched, summed over layers (CPU backend)",
                      {8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096});
  m.declare_counter("frank_draft_tokens_accepted_total", "Drafted tokens the verify steps accepted");
  m.declare_counter("frank_draft_accepted_by_position_total",
                    "Verify steps that accepted the draft at this position (label position, 1 = first draft)");
  m.declare_counter("frank_prefix_checkpoints_total", "Session checkpoints taken");
  m.declare_counter("frank_prefix_checkpoint_bytes_total", "Bytes of the session checkpoints taken");
  m.declare_counter("frank_prefix_cache_evictions_total", "Conversations evicted from the prefix cache");
  m.declare_counter("frank_prefix_cache_hits_total",
                    "Requests resumed from a kept state, by tier (label tier: gpu = a session resident in GPU "
                    "memory, host = the prefix cache, disk = the prefix store)");
  m.declare_counter("frank_prefix_cache_hit_tokens_total",
                    "Prompt tokens resumed from a kept state, by tier (label tier)");
  m.declare_counter("frank_prefix_cache_misses_total", "Requests that found nothing to resume (a fresh session)");
  m.declare_gauge("frank_gpu_resident_sessions", "Ended conversations whose sessions are kept in GPU memory");
  m.declare_counter("frank_gpu_session_evictions_total", "Sessions evicted from GPU memory (least recently used)");
}

EngineWorker::EngineWorker(const engine::Model& model, RequestSessions& sessions, Metrics& metrics,
                           int context_length, int64_t checkpoint_interval, EngineDebugOptions debug,
                           int draft_tokens, RoutingRecorder* routing)
    : model_(model),
      sessions_(sessions),
      metrics_(metrics),
      context_length_(context_length),
      checkpoint_interval_(checkpoint_interval),
      debug_(debug),
      draft_tokens_(draft_tokens),
      drafting_(draft_tokens != 0 && model.weights().mtp.has_value()),
      routing_(routing) {
  if (checkpoint_interval <= 0) throw Error("the prefix checkpoint interval must be positive");
  if (draft_tokens == kAutoDraftTokens)
    chooser_.emplace(engine::DraftLengthChooser::auto_limit(model.config().sliding_window));
}

Tensor EngineWorker::forward(std::span<const int32_t> ids, engine::VerifyTarget* target, Tensor* streams) {
  Tensor logits =
      target != nullptr ? target->forward(ids, engine::Model::Logits::Last, streams) : sessions_.forward(ids);
  metrics_.add("frank_steps_total", 1);
  if (routing_ != nullptr)
    if (const engine::Session* session = sessions_.host_session())
      routing_->record(*session, ids.size() == 1 ? experts::StepKind::Decode : experts::StepKind::Prefill);
  if (debug_.logit_noise > 0)
    perturb_logits(std::span<float>(logits.row(0), static_cast<size_t>(logits.cols())), sessions_.position() - 1,
                   debug_.logit_noise);
  if (debug_.step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(debug_.step_delay_ms));
  return logits;
}

void EngineWorker::execute(Job& job) {
  metrics_.observe("frank_queue_wait_seconds", seconds_since(job.enqueued));
  JobEnd end;
  try {
    end = generate(job);
  } catch (const std::exception& e) {
    // The request fails; the server goes on, and the next request starts from a fresh session
    // (after a device error the session's state cannot be trusted).
    sessions_.drop();
    end = JobEnd{"error", e.what(), static_cast<int>(job.request.prompt.size())};
  }
  metrics_.add("frank_requests_total", 1, {{"outcome", end.finish_reason}});
  metrics_.add("frank_prompt_tokens_total", end.prompt_tokens);
  metrics_.add("frank_prompt_tokens_cached_total", end.cached_tokens);
  metrics_.add("frank_generated_tokens_total", end.completion_tokens);
  job.push(std::move(end));
}

JobEnd EngineWorker::generate(Job& job) {
  const auto& req = job.request;
  const auto& config = model_.config();
  const auto start = Clock::now();
  JobEnd end{"", "", static_cast<int>(req.prompt.size())};
  auto interrupted = [&]() -> const char* {
    if (job.stop_requested() == Job::StopRequest::ClientGone) return "cancelled";
    if (req.deadline && Clock::now() > *req.deadline) return "timeout";
    return nullptr;
  };

  const int64_t reused = sessions_.open(req.prompt);
  end.cached_tokens = static_cast<int>(reused);
  std::vector<int32_t> fed(req.prompt.begin(), req.prompt.end());  // what the session consumes
  Clock::time_point first_token;
  auto finish = [&](const char* reason) {
    end.finish_reason = reason;
    if (end.completion_tokens > 1)
      metrics_.observe("frank_decode_seconds_per_token",
                       seconds_since(first_token) / static_cast<double>(end.completion_tokens - 1));
    fed.resize(static_cast<size_t>(sessions_.position()));
    sessions_.close(std::move(fed));
    return end;
  };

  // A speculative request feeds its prompt through the verify target too: the drafter reads the
  // streams of the last prefill chunk, which starts at `last_chunk`.
  const bool forced = !req.forced_completion.empty();
  std::optional<engine::Speculation> speculation;
  if (drafting_ && !forced) speculation.emplace(sessions_.speculation());
  engine::VerifyTarget* target = speculation ? speculation->target.get() : nullptr;
  Tensor prefill_streams;  // the last chunk's, where the drafter reads them on the host
  Tensor* host_streams = speculation && speculation->drafter->reads_host_streams() ? &prefill_streams : nullptr;
  int64_t last_chunk = reused;

  // Prefill what the cache did not cover, in chunks that end at checkpoint positions (multiples of
  // the interval, and the prompt's end: the next turn of a conversation starts there).
  const int64_t prompt_end = static_cast<int64_t>(req.prompt.size());
  Tensor logits;  // the last prefill chunk's (last row)
  counted_ = {};
  auto is_boundary = [&](int64_t p) {
    return std::find(req.message_boundaries.begin(), req.message_boundaries.end(), p) != req.message_boundaries.end();
  };
  for (int64_t pos = reused; pos < prompt_end;) {
    if (const char* why = interrupted()) return finish(why);
    int64_t next =
        std::min({prompt_end, pos + kPrefillChunk, (pos / checkpoint_interval_ + 1) * checkpoint_interval_});
    for (int64_t b : req.message_boundaries)
      if (b > pos && b < next) next = b;
    logits = forward(std::span<const int32_t>(req.prompt).subspan(pos, next - pos), target, host_streams);
    last_chunk = pos;
    pos = next;
    if (pos == prompt_end || pos % checkpoint_interval_ == 0 || is_boundary(pos))
      if (const auto bytes = sessions_.checkpoint()) {
        metrics_.add("frank_prefix_checkpoints_total", 1);
        metrics_.add("frank_prefix_checkpoint_bytes_total", static_cast<double>(*bytes));
      }
  }

  // Each emitted token: its event (log-probabilities from the logits it was chosen at), then the
  // checks that may end the request; `consumed` is how many tokens the session had taken before
  // this one (as in plain decoding, whatever a verify step fed after it). Returns the finish
  // reason, or nullptr to go on.
  const int limit = forced ? static_cast<int>(req.forced_completion.size()) : req.max_tokens;
  auto emit = [&](std::span<const float> chosen_at, int32_t id, int64_t consumed) -> const char* {
    job.push(token_event(chosen_at, id, req.top_logprobs));
    if (end.completion_tokens++ == 0) {
      first_token = Clock::now();
      metrics_.observe("frank_time_to_first_token_seconds", seconds_since(start),
                       {{"cache", reused > 0 ? "warm" : "cold"}});
    }
    if (job.stop_requested() == Job::StopRequest::Satisfied) return "stop";
    if (const char* why = interrupted()) return why;
    if (!forced && id == config.eos_token_id && !req.ignore_eos) return "stop";
    if (end.completion_tokens >= limit) return forced ? "stop" : "length";
    if (consumed >= context_length_) return "length";
    return nullptr;
  };
  auto row = [](const Tensor& t, int64_t r) { return std::span<const float>(t.row(r), static_cast<size_t>(t.cols())); };

  if (speculation) {
    // Verify steps; a step that emits past the token ending the request is rewound to it.
    engine::SpeculativeDecoder decoder(*target, *speculation->drafter, draft_tokens_, req.sampling,
                                       chooser_ ? &*chooser_ : nullptr);
    decoder.start(row(logits, logits.rows() - 1), prefill_streams, last_chunk);
    while (true) {
      const int room =
          std::min(static_cast<int>(context_length_ - target->position()) - 1, limit - end.completion_tokens - 1);
      const int64_t position_before = target->position();
      const auto step_start = Clock::now();
      const auto emitted = decoder.step(fed, room);
      const double seconds = seconds_since(step_start);
      record_verify_step(emitted.size(), seconds, decoder.stats());
      for (size_t i = 0; i < emitted.size(); ++i)
        if (const char* why = emit(emitted[i].logits, emitted[i].id, position_before + static_cast<int64_t>(i))) {
          // The request ends inside the step: keep the session at its last emitted token, so the
          // prefix cache holds exactly what the client saw.
          if (i + 1 < emitted.size()) decoder.rewind_last_step(static_cast<int>(i) + 1);
          return finish(why);
        }
    }
  }
  engine::Sampler sampler(req.sampling);
  while (true) {
    const auto last = row(logits, logits.rows() - 1);
    const int32_t next = forced ? req.forced_completion[end.completion_tokens] : sampler.next(last);
    if (const char* why = emit(last, next, sessions_.position())) return finish(why);
    fed.push_back(next);
    logits = forward(std::span<const int32_t>(&next, 1));
  }
}

void EngineWorker::record_verify_step(size_t emitted, double seconds, const engine::SpeculativeStats& total) {
  // Which experts a step routed to is read from host sessions only.
  if (const engine::Session* session = sessions_.host_session()) {
    if (routing_ != nullptr) routing_->record(*session, experts::StepKind::Verify);
    metrics_.observe("frank_verify_step_experts", static_cast<double>(experts_touched(*session)));
  }
  metrics_.observe("frank_verify_step_draft_tokens", static_cast<double>(total.drafted - counted_.drafted));
  metrics_.add("frank_steps_total", 1);
  metrics_.add("frank_verify_steps_total", 1);
  metrics_.observe("frank_tokens_per_verify_step", static_cast<double>(emitted));
  metrics_.observe("frank_verify_step_seconds", seconds);
  // The totals are per request; the counters take this step's share.
  metrics_.add("frank_draft_tokens_total", static_cast<double>(total.drafted - counted_.drafted));
  metrics_.add("frank_draft_tokens_accepted_total", static_cast<double>(total.accepted - counted_.accepted));
  for (size_t i = 0; i < total.accepted_at.size(); ++i) {
    const int64_t before = i < counted_.accepted_at.size() ? counted_.accepted_at[i] : 0;
    if (total.accepted_at[i] > before)
      metrics_.add("frank_draft_accepted_by_position_total", static_cast<double>(total.accepted_at[i] - before),
                   {{"position", std::to_string(i + 1)}});
  }
  counted_ = total;
}

}  // namespace frank::server
