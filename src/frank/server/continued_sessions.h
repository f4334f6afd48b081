#pragma once
// RequestSessions over any SessionRunner (the CUDA backend's): for backends whose sessions cannot
// be checkpointed or rewound yet, so there is no prefix cache. The session of the last request is
// kept, and a request whose prompt begins with exactly the tokens that session consumed (an agent
// sending the conversation so far plus a tool result) continues it: only the new tokens run. Any
// other prompt starts a fresh session.
#include <functional>
#include <memory>

#include "frank/engine/session_runner.h"
#include "frank/server/request_sessions.h"

namespace frank::server {

class ContinuedSessions : public RequestSessions {
 public:
  using NewRunner = std::function<std::unique_ptr<engine::SessionRunner>()>;
  explicit ContinuedSessions(NewRunner new_runner) : new_runner_(std::move(new_runner)) {}

  int64_t open(std::span<const int32_t> prompt) override;
  // Throws frank::Error when asked for residual streams (this backend has no speculative decoding).
  Tensor forward(std::span<const int32_t> ids, Tensor* streams) override;
  int64_t position() const override { return static_cast<int64_t>(consumed_.size()); }
  std::optional<size_t> checkpoint() override { return std::nullopt; }
  // The session stays as it is for the next request (it tracks what it consumed itself).
  void close(std::vector<int32_t>) override {}
  void drop() override;

 private:
  NewRunner new_runner_;
  std::unique_ptr<engine::SessionRunner> runner_;  // the open or last session; null after a failure
  std::vector<int32_t> consumed_;                  // the tokens it has consumed
};

}  // namespace frank::server
