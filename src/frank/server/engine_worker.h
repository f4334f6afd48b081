#pragma once
// Runs one Job on the model, on whatever backend `RequestSessions` wraps: open a session for the
// prompt (reusing what the backend kept), prefill the rest (asking for checkpoints), then decode
// token by token (sampled or forced) or in verify steps (speculative decoding on the sessions'
// backend), emitting a TokenEvent per token and a JobEnd; checks for
// stop requests and the deadline between steps, closes the session (kept for later requests) or
// drops it after a failure, and records the engine-side metrics.
#include <optional>

#include "frank/engine/draft_length.h"
#include "frank/engine/model.h"
#include "frank/engine/speculative.h"
#include "frank/server/job.h"
#include "frank/server/metrics.h"
#include "frank/server/request_sessions.h"
#include "frank/server/routing_recorder.h"

namespace frank::server {

// Deliberate faults for the lab's own tests (`frank serve --debug-*`): a slower arm for an A/B
// test that must reach "reject", a perturbed arm that the fidelity screen must catch.
inline constexpr int kAutoDraftTokens = -1;  // `--draft-tokens auto`

struct EngineDebugOptions {
  int step_delay_ms = 0;     // sleep this long after every forward step
  double logit_noise = 0.0;  // add a fixed pseudo-random offset in [-x, x] to every logit
};

class EngineWorker {
 public:
  // `checkpoint_interval`: tokens between the checkpoints asked of `sessions` (plus one at the end
  // of every prompt and at its message boundaries). draft_tokens > 0: speculative decoding with the
  // model's MTP block, when it has one, on the sessions' backend (RequestSessions::speculation);
  // kAutoDraftTokens: the number drafted per step is chosen from measured costs (draft_length.h).
  // `routing` needs host sessions.
  EngineWorker(const engine::Model& model, RequestSessions& sessions, Metrics& metrics, int context_length,
               int64_t checkpoint_interval, EngineDebugOptions debug = {}, int draft_tokens = 0,
               RoutingRecorder* routing = nullptr);
  void execute(Job& job);

  // Declares the metrics this worker records (called once by the server).
  static void declare_metrics(Metrics& metrics);

 private:
  JobEnd generate(Job& job);
  // One forward call on the open session, counted, with the debug faults applied: the last
  // position's logits, [1, vocab]. Through `target` when the request speculates (its calls leave
  // the streams the drafter reads; on the host into `streams`, when given), else through the sessions.
  Tensor forward(std::span<const int32_t> ids, engine::VerifyTarget* target = nullptr, Tensor* streams = nullptr);
  void record_verify_step(size_t emitted, double seconds, const engine::SpeculativeStats& total);

  const engine::Model& model_;
  RequestSessions& sessions_;
  Metrics& metrics_;
  int context_length_;
  int64_t checkpoint_interval_;
  EngineDebugOptions debug_;
  int draft_tokens_;
  bool drafting_;  // speculative decoding asked for and the model has an MTP block
  std::optional<engine::DraftLengthChooser> chooser_;  // --draft-tokens auto; kept across requests
  RoutingRecorder* routing_;
  engine::SpeculativeStats counted_;  // the running request's stats already added to the counters
};

}  // namespace frank::server
