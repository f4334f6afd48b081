// The V4.1 indexer's two-level top-k (dsv41-model.md §5.2, reference notes A1/A3) on hand-made
// scores whose right answer is worked out in the comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "frank/engine/indexer_v41.h"

namespace frank::engine {
namespace {

using ::testing::ElementsAre;
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(IndexerV41, CandidateBlocksKeepTheBestAndPinTheNewest) {
  // 10 entries in blocks of 4: [0..3] max 9, [4..7] max 5, [8..9] max 1. Two blocks are kept: the
  // newest (block 2, pinned although it scores lowest) and the best other one (block 0).
  const std::vector<float> scores{1, 9, 2, 3, 5, 0, 4, 2, 1, 0};
  EXPECT_THAT(select_candidate_blocks(scores, 10, 2, 4), ElementsAre(1, 1, 1, 1, 0, 0, 0, 0, 1, 1));
  // With 7 reachable entries the newest is entry 6 (block 1): blocks 1 and 0 are kept, and the
  // unreachable block 2 is not, whatever its scores.
  const std::vector<float> big_tail{1, 9, 2, 3, 5, 0, 4, 99, 99, 99};
  EXPECT_THAT(select_candidate_blocks(big_tail, 7, 2, 4), ElementsAre(1, 1, 1, 1, 1, 1, 1, 1, 0, 0));
}

TEST(IndexerV41, CandidateBlocksDropUnreachableBlocks) {
  // Only block 0 is reachable: asking for 3 blocks keeps one.
  const std::vector<float> scores{2, 1, 7, 7, 7, 7};
  EXPECT_THAT(select_candidate_blocks(scores, 2, 3, 2), ElementsAre(1, 1, 0, 0, 0, 0));
  // No reachable entry (a query before the first entry closes): no block, nothing pinned.
  EXPECT_THAT(select_candidate_blocks(scores, 0, 3, 2), ElementsAre(0, 0, 0, 0, 0, 0));
}

TEST(IndexerV41, TopkAmongReachableEntries) {
  const std::vector<float> scores{0.5f, 3, -1, 2, 8, 7};
  // Entries 0..4 reachable, top 3: 8 (4), 3 (1), 2 (3); returned by entry index.
  EXPECT_THAT(select_topk_entries(scores, 5, nullptr, 3), ElementsAre(1, 3, 4));
  // Candidate mask (a Reindex layer): entries 1 and 4 excluded -> 2 (3), 0.5 (0), -1 (2).
  const std::vector<uint8_t> candidates{1, 0, 1, 1, 0, 1};
  EXPECT_THAT(select_topk_entries(scores, 5, candidates.data(), 3), ElementsAre(0, 2, 3));
  // Fewer reachable entries than k: all of them, no padding.
  EXPECT_THAT(select_topk_entries(scores, 2, nullptr, 3), ElementsAre(0, 1));
  EXPECT_THAT(select_topk_entries(scores, 0, nullptr, 3), ElementsAre());
}

TEST(IndexerV41, ExactZeroTiesPreferTheOlderEntry) {
  // ReLU scores tie at exactly 0 (reference notes §4): with one slot left, entry 1 beats entry 3.
  const std::vector<float> scores{4, 0, -kInf, 0};
  EXPECT_THAT(select_topk_entries(scores, 4, nullptr, 2), ElementsAre(0, 1));
}

}  // namespace
}  // namespace frank::engine
