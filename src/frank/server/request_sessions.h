#pragma once
// RequestSessions: what the engine worker runs requests on, one at a time, whatever the backend.
// Each request opens a session for its prompt (reusing what earlier requests left, where the
// backend can), feeds it chunks of tokens, and closes it with the tokens it consumed (kept for
// later requests) or drops it after a failure. The request loop itself — prefill, sampling, stop
// handling, streaming, cancellation, metrics — is the worker's and the same on every backend.
//
// The implementation is PrefixCachedSessions (the prefix cache's tiers over any backend's
// sessions); the interface keeps the worker independent of it (tests drive the worker on their own).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/session.h"
#include "frank/engine/speculative.h"

namespace frank::server {

class RequestSessions {
 public:
  virtual ~RequestSessions() = default;

  // Opens the session for `prompt` (non-empty): returns how many of its first tokens the session
  // has already consumed (fewer than all of them: the last one's logits start the completion).
  virtual int64_t open(std::span<const int32_t> prompt) = 0;
  // Feeds `ids` at the session's next positions: the last position's logits, [1, vocab].
  virtual Tensor forward(std::span<const int32_t> ids) = 0;
  // Tokens the open session has consumed.
  virtual int64_t position() const = 0;
  // Checkpoints the open session here, so that a later prompt departing at this position resumes
  // from it: the checkpoint's bytes, or nullopt where the backend keeps no checkpoints.
  virtual std::optional<size_t> checkpoint() = 0;
  // Ends the request: `consumed` are exactly the tokens the session consumed; kept for reuse.
  virtual void close(std::vector<int32_t> consumed) = 0;
  // Ends a request that failed: the session's state is unknown, nothing of it is reused.
  virtual void drop() = 0;
  // Speculative decoding on the open session (engine::BackendSession::speculation): the target
  // and drafter refer to it until the request ends. Throws frank::Error without an MTP block.
  virtual engine::Speculation speculation() = 0;
  // The open session itself where it lives on the host (the CPU reference), else null: routing
  // traces read it.
  virtual engine::Session* host_session() { return nullptr; }
};

}  // namespace frank::server
