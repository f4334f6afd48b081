#include "frank/experts/expert_cache.h"

#include <algorithm>
#include <limits>

namespace frank::experts {

ExpertCache::ExpertCache(size_t n_ids, size_t slots, const CachePolicy& policy)
    : slots_(slots), policy_(policy), scores_(n_ids, policy.half_life_steps), cached_(n_ids, 0) {}

double ExpertCache::admission_threshold() const {
  if (slots_ == 0) return std::numeric_limits<double>::infinity();
  if (by_score_.size() < slots_) return 0.0;
  return scores_.value(by_score_.begin()->second);
}

void ExpertCache::insert(uint32_t id) {
  cached_[id] = 1;
  by_score_.emplace(scores_.stored(id), id);
}

void ExpertCache::rebuild_order() {
  std::set<std::pair<double, uint32_t>> rebuilt;
  for (const auto& [stored, id] : by_score_) rebuilt.emplace(scores_.stored(id), id);
  by_score_.swap(rebuilt);
}

size_t ExpertCache::end_step(std::span<const uint32_t> used) {
  if (scores_.next_step()) rebuild_order();
  candidates_.clear();
  for (uint32_t id : used) {
    if (holds(id)) {
      by_score_.erase({scores_.stored(id), id});
      scores_.add(id);
      by_score_.emplace(scores_.stored(id), id);
    } else {
      scores_.add(id);
      candidates_.push_back(id);
    }
  }
  if (slots_ == 0) return 0;
  std::sort(candidates_.begin(), candidates_.end(), [&](uint32_t a, uint32_t b) {
    return scores_.stored(a) != scores_.stored(b) ? scores_.stored(a) > scores_.stored(b) : a < b;
  });
  size_t fills = 0;
  for (uint32_t id : candidates_) {
    if (fills == policy_.max_fills_per_step) break;
    if (by_score_.size() == slots_) {
      const auto lowest = by_score_.begin();
      if (!(scores_.stored(id) > lowest->first)) break;  // later candidates score no higher
      cached_[lowest->second] = 0;
      by_score_.erase(lowest);
    }
    insert(id);
    ++fills;
  }
  return fills;
}

}  // namespace frank::experts
