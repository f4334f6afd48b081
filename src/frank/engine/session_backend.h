#pragma once
// A backend's sessions as the prefix cache sees them: a session runs tokens forward, takes
// checkpoints of itself, and moves to and from the host layout (engine::Session) that the prefix
// cache, its checkpoints and its disk store keep. The prefix cache's logic (server/
// prefix_cached_sessions.h) is written once over this interface. The CPU reference's sessions live
// on the host (HostSessions, here); the CUDA backend's in device memory (cuda/device_sessions.h).
#include <cstdint>
#include <memory>
#include <span>

#include "frank/core/tensor.h"
#include "frank/engine/model.h"
#include "frank/engine/session.h"
#include "frank/engine/session_checkpoint.h"
#include "frank/engine/speculative.h"

namespace frank::engine {

class BackendSession {
 public:
  virtual ~BackendSession() = default;
  // Feeds `ids` at the next positions: the last position's logits, [1, vocab] (only those are ever
  // sampled from, so the head runs once per call).
  virtual Tensor forward(std::span<const int32_t> ids) = 0;
  // Tokens consumed so far.
  virtual int64_t position() const = 0;
  // A checkpoint at the current position (session_checkpoint.h).
  virtual SessionCheckpoint checkpoint() const = 0;
  // A copy of the state in the host layout.
  virtual Session to_host() const = 0;
  // The state moved to the host layout; the session is spent. A backend whose state already is
  // in that layout moves it instead of copying.
  virtual Session release_to_host() { return to_host(); }
  // Speculative decoding on this session, on its backend: a verify target that feeds, verifies and
  // rewinds this very session, and the MTP drafter beside it. Both refer to the session (they must
  // not outlive it); a speculative request feeds its prompt through the target too, whose calls
  // leave the streams the drafter reads. Throws frank::Error when the model has no MTP block.
  virtual Speculation speculation() = 0;
  // The state itself where it lives on the host (routing traces read it), else null.
  virtual Session* host_session() { return nullptr; }
};

class SessionBackend {
 public:
  virtual ~SessionBackend() = default;
  // A session that has consumed nothing.
  virtual std::unique_ptr<BackendSession> fresh() = 0;
  // A session that continues `state` (moved to the backend: an upload for a GPU). Throws
  // frank::Error when the state does not fit the model.
  virtual std::unique_ptr<BackendSession> resume(Session state) = 0;
};

// The CPU reference's sessions: the host layout is their own.
class HostSessions : public SessionBackend {
 public:
  explicit HostSessions(const Model& model) : model_(model) {}
  std::unique_ptr<BackendSession> fresh() override;
  std::unique_ptr<BackendSession> resume(Session state) override;

 private:
  const Model& model_;
};

}  // namespace frank::engine
