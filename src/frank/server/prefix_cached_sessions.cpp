#include "frank/server/prefix_cached_sessions.h"

namespace frank::server {

int64_t PrefixCachedSessions::open(std::span<const int32_t> prompt) {
  run_.reset();
  if (cache_ != nullptr) run_ = cache_->resume(prompt);
  if (!run_ && store_ != nullptr)
    if (auto s = store_->load_longest_prefix(prompt))
      run_ = engine::Resume{std::move(s->session), static_cast<int64_t>(s->tokens.size()), std::move(s->checkpoints)};
  if (!run_) run_ = engine::Resume{model_.new_session(), 0, {}};
  return run_->reused_tokens;
}

Tensor PrefixCachedSessions::forward(std::span<const int32_t> ids, Tensor* streams) {
  // Only the last position's logits are ever sampled from: the head runs once per call.
  return model_.forward(run_->session, ids, engine::Model::Logits::Last, streams);
}

std::optional<size_t> PrefixCachedSessions::checkpoint() {
  run_->checkpoints.push_back(engine::take_checkpoint(run_->session));
  return run_->checkpoints.back().bytes();
}

void PrefixCachedSessions::close(std::vector<int32_t> consumed) {
  engine::Resume run = std::move(*run_);
  run_.reset();
  if (store_ != nullptr) store_->save(consumed, run.session, run.checkpoints);
  if (cache_ == nullptr) return;
  const uint64_t evicted = cache_->evictions();
  cache_->store(std::move(consumed), std::move(run.session), std::move(run.checkpoints));
  metrics_.add("frank_prefix_cache_evictions_total", static_cast<double>(cache_->evictions() - evicted));
}

}  // namespace frank::server
