#include "frank/engine/prefix_cache.h"

#include <algorithm>

namespace frank::engine {
namespace {

int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const auto n = std::min(a.size(), b.size());
  return std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first - a.begin();
}

size_t compressor_bytes(const CompressorState& c) { return open_window_bytes(c) + c.entries.size() * sizeof(float); }

}  // namespace

size_t session_bytes(const Session& s) {
  size_t n = sizeof(s);
  for (const auto& l : s.layers)
    n += l.window.size() * sizeof(float) + compressor_bytes(l.compressor) + compressor_bytes(l.indexer);
  return n;
}

std::optional<Resume> PrefixCache::resume(std::span<const int32_t> prompt, int64_t beyond) {
  std::lock_guard lock(mutex_);
  const int64_t limit = static_cast<int64_t>(prompt.size()) - 1;  // leave one token to run
  auto best = lru_.end();
  int64_t best_point = beyond;
  const SessionCheckpoint* best_checkpoint = nullptr;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const int64_t shared = std::min(common_prefix(it->tokens, prompt), limit);
    if (shared == static_cast<int64_t>(it->tokens.size()) && shared > best_point) {
      best = it, best_point = shared, best_checkpoint = nullptr;  // the exact end of the kept sequence
      continue;
    }
    for (auto c = it->checkpoints.rbegin(); c != it->checkpoints.rend(); ++c)
      if (c->position <= shared) {
        if (c->position > best_point) best = it, best_point = c->position, best_checkpoint = &*c;
        break;
      }
  }
  if (best == lru_.end()) return std::nullopt;
  Resume r;
  r.reused_tokens = best_point;
  r.session = best_checkpoint ? restore_checkpoint(*best_checkpoint, best->session) : best->session;
  for (const auto& c : best->checkpoints)
    if (c.position <= best_point) r.checkpoints.push_back(c);
  lru_.splice(lru_.begin(), lru_, best);
  return r;
}

void PrefixCache::store(std::vector<int32_t> tokens, Session session, std::vector<SessionCheckpoint> checkpoints) {
  std::lock_guard lock(mutex_);
  Conversation c{std::move(tokens), std::move(session), std::move(checkpoints)};
  c.bytes = session_bytes(c.session);
  for (const auto& k : c.checkpoints) c.bytes += k.bytes();
  // Larger than the whole budget: not kept, and the kept conversations stay as they are (one this
  // conversation extends is still the best resume point for its next turn).
  if (c.bytes > budget_) return;
  // A kept conversation whose tokens this one starts with is superseded by it.
  std::erase_if(lru_, [&](const Conversation& old) {
    const bool superseded = common_prefix(old.tokens, c.tokens) == static_cast<int64_t>(old.tokens.size());
    if (superseded) bytes_ -= old.bytes;
    return superseded;
  });
  bytes_ += c.bytes;
  lru_.push_front(std::move(c));
  while (bytes_ > budget_) {
    bytes_ -= lru_.back().bytes;
    lru_.pop_back();
    ++evictions_;
  }
}

size_t PrefixCache::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

size_t PrefixCache::conversations() const {
  std::lock_guard lock(mutex_);
  return lru_.size();
}

uint64_t PrefixCache::evictions() const {
  std::lock_guard lock(mutex_);
  return evictions_;
}

Tensor prefill_with_checkpoints(const Model& model, Session& session, std::span<const int32_t> ids,
                                const std::vector<int64_t>& checkpoint_positions,
                                std::vector<SessionCheckpoint>& checkpoints) {
  Tensor logits;
  size_t done = 0;
  auto run_to = [&](size_t end) {
    if (end <= done) return;
    logits = model.forward(session, ids.subspan(done, end - done));
    done = end;
  };
  const int64_t start = session.position;
  for (int64_t p : checkpoint_positions) {
    if (p <= start || p > start + static_cast<int64_t>(ids.size())) continue;
    run_to(static_cast<size_t>(p - start));
    checkpoints.push_back(take_checkpoint(session));
  }
  run_to(ids.size());
  return logits;
}

}  // namespace frank::engine
