#pragma once
// The DeepSeek-V4.1 indexer's selection (dsv41-model.md §5.2, reference notes A1/A3): the two-level
// top-k over one query's entry scores, as pure functions. Scoring itself is not here.
#include <cstdint>
#include <span>
#include <vector>

namespace frank::engine {

// Level 1, at the candidate-source layer. `scores` holds one query's scores of every entry its KV
// source has (the call's capacity); entries at or after `visible` are not reachable yet. A block of
// `block_size` consecutive entries scores its maximum reachable entry (-inf when it has none); the
// block holding the newest reachable entry, (visible - 1) / block_size, is pinned; the best
// min(topk_blocks, blocks) blocks are kept, except blocks with no reachable entry. Returns the
// per-entry mask (1 = candidate), scores.size() long.
std::vector<uint8_t> select_candidate_blocks(std::span<const float> scores, int visible, int topk_blocks,
                                             int block_size);

// The selection of an index source: the reachable entries (index < visible, and inside `candidates`
// when given, i.e. at a Reindex layer) with the top min(topk, scores.size()) scores. Unreachable
// entries are never picked, so fewer may come back. Sorted by entry index. Equal scores prefer the
// older entry (transformers has no tie rule).
std::vector<int32_t> select_topk_entries(std::span<const float> scores, int visible, const uint8_t* candidates,
                                         int topk);

}  // namespace frank::engine
