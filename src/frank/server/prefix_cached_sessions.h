#pragma once
// RequestSessions with the prefix cache, on any backend (engine::SessionBackend): a request resumes
// from the longest reusable point its prompt reaches in one of three tiers and runs only the rest.
//   1. Resident sessions (`resident_sessions` of them, LRU; 0 for the CPU reference, whose
//      sessions already live in host memory): the last conversations' sessions kept as they are on
//      the backend (in GPU memory for CUDA), so a turn that continues one pays no upload. Only the
//      exact end of a resident conversation is reusable.
//   2. The prefix cache (host memory): ends and checkpoints of kept conversations; resuming moves
//      the chosen point to the backend (an upload for CUDA).
//   3. The prefix store (disk), when nothing in memory is reusable.
// The worker asks for checkpoints (regular positions, message boundaries, the prompt's end); each
// ended request is kept in all tiers (moved to the host layout for the cache and the store).
#include <cstddef>
#include <list>
#include <memory>
#include <optional>
#include <vector>

#include "frank/engine/prefix_cache.h"
#include "frank/engine/prefix_store.h"
#include "frank/engine/session_backend.h"
#include "frank/server/metrics.h"
#include "frank/server/request_sessions.h"

namespace frank::server {

class PrefixCachedSessions : public RequestSessions {
 public:
  // `cache`, `store`: null for none (without both no checkpoints are taken: nothing would keep
  // them). Hits per tier, misses and evictions are counted in `metrics` (EngineWorker::declare_metrics).
  PrefixCachedSessions(engine::SessionBackend& backend, engine::PrefixCache* cache, const engine::PrefixStore* store,
                       Metrics& metrics, size_t resident_sessions = 0)
      : backend_(backend), cache_(cache), store_(store), metrics_(metrics), resident_capacity_(resident_sessions) {}

  int64_t open(std::span<const int32_t> prompt) override;
  Tensor forward(std::span<const int32_t> ids) override { return open_->forward(ids); }
  int64_t position() const override { return open_->position(); }
  std::optional<size_t> checkpoint() override;
  void close(std::vector<int32_t> consumed) override;
  // Also frees the resident sessions: a failure may be the device's (out of memory, a lost
  // context); the prefix cache still holds their state.
  void drop() override;
  engine::Speculation speculation() override { return open_->speculation(); }
  engine::Session* host_session() override { return open_ ? open_->host_session() : nullptr; }

  size_t resident_sessions() const { return resident_.size(); }

 private:
  struct Resident {
    std::vector<int32_t> tokens;  // exactly what the session consumed
    std::unique_ptr<engine::BackendSession> session;
    std::vector<engine::SessionCheckpoint> checkpoints;  // its conversation's, carried to the next turn
  };
  void start(std::unique_ptr<engine::BackendSession> session, std::vector<engine::SessionCheckpoint> checkpoints,
             const char* tier, int64_t reused);
  void keep_resident(std::vector<int32_t> tokens, std::unique_ptr<engine::BackendSession> session,
                     std::vector<engine::SessionCheckpoint> checkpoints);

  engine::SessionBackend& backend_;
  engine::PrefixCache* cache_;
  const engine::PrefixStore* store_;
  Metrics& metrics_;
  const size_t resident_capacity_;
  std::list<Resident> resident_;                        // most recently used first
  std::unique_ptr<engine::BackendSession> open_;        // the open request's session
  std::vector<engine::SessionCheckpoint> checkpoints_;  // its conversation's checkpoints
};

}  // namespace frank::server
