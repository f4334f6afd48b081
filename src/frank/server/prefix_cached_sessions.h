#pragma once
// The CPU reference's RequestSessions: a request resumes from the prefix cache (in memory) or the
// prefix store (on disk) where its prompt repeats a kept conversation, takes checkpoints where the
// worker asks, and is kept in both when it ends.
#include <optional>

#include "frank/engine/model.h"
#include "frank/engine/prefix_cache.h"
#include "frank/engine/prefix_store.h"
#include "frank/server/metrics.h"
#include "frank/server/request_sessions.h"

namespace frank::server {

class PrefixCachedSessions : public RequestSessions {
 public:
  // `cache`, `store`: null for none (every request then starts cold). Evictions are counted in
  // `metrics` (frank_prefix_cache_evictions_total).
  PrefixCachedSessions(const engine::Model& model, engine::PrefixCache* cache, const engine::PrefixStore* store,
                       Metrics& metrics)
      : model_(model), cache_(cache), store_(store), metrics_(metrics) {}

  int64_t open(std::span<const int32_t> prompt) override;
  Tensor forward(std::span<const int32_t> ids, Tensor* streams) override;
  int64_t position() const override { return run_->session.position; }
  std::optional<size_t> checkpoint() override;
  void close(std::vector<int32_t> consumed) override;
  void drop() override { run_.reset(); }
  engine::Session* host_session() override { return run_ ? &run_->session : nullptr; }

 private:
  const engine::Model& model_;
  engine::PrefixCache* cache_;
  const engine::PrefixStore* store_;
  Metrics& metrics_;
  std::optional<engine::Resume> run_;  // the open request's session and its checkpoints
};

}  // namespace frank::server
