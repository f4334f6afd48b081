#include "frank/server/prefix_cached_sessions.h"

#include <algorithm>

namespace frank::server {
namespace {

// `kept` is a prefix of `tokens`.
bool begins_with(std::span<const int32_t> tokens, const std::vector<int32_t>& kept) {
  return kept.size() <= tokens.size() && std::equal(kept.begin(), kept.end(), tokens.begin());
}

}  // namespace

int64_t PrefixCachedSessions::open(std::span<const int32_t> prompt) {
  open_.reset();
  checkpoints_.clear();
  // The longest resident conversation the prompt extends by at least one token (its logits start
  // the completion).
  auto resident = resident_.end();
  int64_t resident_reuse = 0;
  for (auto it = resident_.begin(); it != resident_.end(); ++it) {
    const auto n = static_cast<int64_t>(it->tokens.size());
    if (n > resident_reuse && n < std::ssize(prompt) && begins_with(prompt, it->tokens))
      resident = it, resident_reuse = n;
  }
  // The prefix cache only where it reaches further: a resident session costs no upload.
  if (cache_ != nullptr)
    if (auto r = cache_->resume(prompt, resident_reuse)) {
      start(backend_.resume(std::move(r->session)), std::move(r->checkpoints), "host", r->reused_tokens);
      return r->reused_tokens;
    }
  if (resident != resident_.end()) {
    start(std::move(resident->session), std::move(resident->checkpoints), "gpu", resident_reuse);
    resident_.erase(resident);
    metrics_.set("frank_gpu_resident_sessions", static_cast<double>(resident_.size()));
    return resident_reuse;
  }
  if (store_ != nullptr)
    if (auto s = store_->load_longest_prefix(prompt)) {
      const auto reused = static_cast<int64_t>(s->tokens.size());
      start(backend_.resume(std::move(s->session)), std::move(s->checkpoints), "disk", reused);
      return reused;
    }
  open_ = backend_.fresh();
  metrics_.add("frank_prefix_cache_misses_total", 1);
  return 0;
}

void PrefixCachedSessions::start(std::unique_ptr<engine::BackendSession> session,
                                 std::vector<engine::SessionCheckpoint> checkpoints, const char* tier, int64_t reused) {
  open_ = std::move(session);
  checkpoints_ = std::move(checkpoints);
  metrics_.add("frank_prefix_cache_hits_total", 1, {{"tier", tier}});
  metrics_.add("frank_prefix_cache_hit_tokens_total", static_cast<double>(reused), {{"tier", tier}});
}

std::optional<size_t> PrefixCachedSessions::checkpoint() {
  if (cache_ == nullptr && store_ == nullptr) return std::nullopt;
  checkpoints_.push_back(open_->checkpoint());
  return checkpoints_.back().bytes();
}

void PrefixCachedSessions::close(std::vector<int32_t> consumed) {
  std::unique_ptr<engine::BackendSession> session = std::move(open_);
  std::vector<engine::SessionCheckpoint> checkpoints = std::move(checkpoints_);
  checkpoints_.clear();
  if (cache_ != nullptr || store_ != nullptr) {
    // Kept resident too: copy the state to the host; else it moves there.
    engine::Session host = resident_capacity_ > 0 ? session->to_host() : session->release_to_host();
    if (store_ != nullptr) store_->save(consumed, host, checkpoints);
    if (cache_ != nullptr) {
      const uint64_t evicted = cache_->evictions();
      // Copied where the resident session keeps them as well.
      cache_->store(consumed, std::move(host), resident_capacity_ > 0 ? checkpoints : std::move(checkpoints));
      metrics_.add("frank_prefix_cache_evictions_total", static_cast<double>(cache_->evictions() - evicted));
    }
  }
  if (resident_capacity_ > 0) keep_resident(std::move(consumed), std::move(session), std::move(checkpoints));
}

void PrefixCachedSessions::keep_resident(std::vector<int32_t> tokens, std::unique_ptr<engine::BackendSession> session,
                                         std::vector<engine::SessionCheckpoint> checkpoints) {
  // A resident conversation whose tokens this one starts with is superseded by it.
  std::erase_if(resident_, [&](const Resident& old) { return begins_with(tokens, old.tokens); });
  resident_.push_front({std::move(tokens), std::move(session), std::move(checkpoints)});
  while (resident_.size() > resident_capacity_) {
    resident_.pop_back();
    metrics_.add("frank_gpu_session_evictions_total", 1);
  }
  metrics_.set("frank_gpu_resident_sessions", static_cast<double>(resident_.size()));
}

void PrefixCachedSessions::drop() {
  open_.reset();
  checkpoints_.clear();
  resident_.clear();
  metrics_.set("frank_gpu_resident_sessions", 0);
}

}  // namespace frank::server
