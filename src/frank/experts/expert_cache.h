#pragma once
// GPU cache slots: copies of CPU-homed experts kept in GPU memory, so that a CPU-homed expert in
// a slot runs on the GPU. The policy (docs/expert-plans.md, "Cache policy") is LFU over decayed
// step counts:
//   - an expert's score counts the steps that used it, decayed with a half-life in steps
//     (DecayedCounts). Steps, not routings: a miss costs one weight read per step however many
//     tokens chose the expert, so "will the next step use it" is what the score must predict, and
//     one prefill chunk of hundreds of tokens must not flood the cache;
//   - after each step, the CPU-homed experts it used that are not cached are candidates, highest
//     score first; a candidate takes a free slot, or evicts the lowest-scored copy if its score is
//     strictly higher; at most max_fills_per_step copies start per step (the PCIe budget);
//   - a copy started after step t is usable from step t + 1 (the copy overlaps the next step's
//     first layers; see the docs for the bandwidth arithmetic).
// Ties go to the lower (layer, expert) index, so replays are deterministic.
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "frank/experts/decayed_counts.h"

namespace frank::experts {

// GPU cache slots when none are asked for (--expert-cache-slots, plan build/simulate --cache-slots):
// one default for the engine and the simulator that models it.
constexpr size_t kDefaultCacheSlots = 512;

struct CachePolicy {
  double half_life_steps = 64;     // score half-life
  size_t max_fills_per_step = 16;  // 16 x 13.4 MB = 214 MB per step, ~4 ms at ~50 GB/s PCIe 5.0 x16
};

class ExpertCache {
 public:
  // `n_ids` experts in all, indexed layer * n_experts + expert; `slots` copies at most.
  ExpertCache(size_t n_ids, size_t slots, const CachePolicy& policy);

  bool holds(uint32_t id) const { return cached_[id] != 0; }
  size_t size() const { return by_score_.size(); }
  double score(uint32_t id) const { return scores_.value(id); }
  // The score an uncached expert must exceed to get a copy now: 0 while a slot is free (any expert
  // used before qualifies), else the lowest cached score; +inf with no slots.
  double admission_threshold() const;

  // Ends a step: decays every score, counts one for each distinct CPU-homed expert in `used`,
  // then starts copies as described above. Returns the number of copies started.
  size_t end_step(std::span<const uint32_t> used);

 private:
  void insert(uint32_t id);
  void rebuild_order();

  size_t slots_;
  CachePolicy policy_;
  DecayedCounts scores_;
  std::vector<char> cached_;
  std::set<std::pair<double, uint32_t>> by_score_;  // cached experts by (stored score, id)
  std::vector<uint32_t> candidates_;                // scratch
};

}  // namespace frank::experts
