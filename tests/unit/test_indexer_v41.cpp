// The V4.1 indexer's two-level top-k (dsv41-model.md §5.2, reference notes A1/A3): on hand-made
// scores whose right answer is worked out in the comments, and on transformers' scores and selections.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "frank/engine/indexer_v41.h"
#include "frank/model/checkpoint.h"
#include "frank/model/config_v41.h"

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

// transformers' index scores of every index source in the fixtures' one-shot run
// (reference.safetensors indexer.layer{l}.scores, before any mask) through frank's selection must give
// transformers' candidate mask (visible entries) and top-k sets. The fixture generator checked that
// no k-th/(k+1)-th score gap is below 1e-6 relative, so the selection has one right answer.
TEST(IndexerV41, SelectionsMatchTransformers) {
  const auto fixtures = std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv41";
  for (const char* name : {"tiny-v41", "tiny-v41-native"}) {
    SCOPED_TRACE(name);
    const auto c = model::load_v41_config(fixtures / name);
    const auto ref = model::Checkpoint::open_file(fixtures / name / "reference.safetensors");
    const int T = static_cast<int>(ref.find("ids")->shape[0]);
    std::vector<std::vector<uint8_t>> candidates(T);  // level 1, per query, once the source has run
    int pruned = 0;  // Reindex queries whose candidate mask removed a visible entry
    for (int layer : c.index_source_layers) {
      SCOPED_TRACE(layer);
      // Visibility counts the tokens of the KV source this layer reads (reference notes A2).
      const int ratio = c.compress_ratio[c.kv_source_of(layer)];
      const int64_t entries = T / ratio;
      const auto scores = ref.read_f32(fmt::format("indexer.layer{}.scores", layer), {T, entries});
      const auto topk_info = ref.find(fmt::format("indexer.layer{}.topk", layer));
      const auto hf_topk = ref.read_i64(topk_info->name, topk_info->shape);
      const int64_t k_width = topk_info->shape[1];
      const bool source = layer == c.candidate_source_layer;
      const bool uses = c.candidate_source_layer >= 0 && layer > c.candidate_source_layer;
      const auto hf_cand = source ? ref.read_i64(fmt::format("indexer.layer{}.candidates", layer), {T, entries})
                                  : std::vector<int64_t>{};
      for (int t = 0; t < T; ++t) {
        const int visible = (t + 1) / ratio;
        const std::span<const float> row(scores.data() + t * entries, entries);
        if (source) {
          candidates[t] = select_candidate_blocks(row, visible, c.candidate_topk_blocks, c.candidate_block_size);
          for (int e = 0; e < visible; ++e)
            ASSERT_EQ(candidates[t][e], hf_cand[t * entries + e]) << "query " << t << " entry " << e;
        }
        if (uses) {
          ASSERT_EQ(candidates[t].size(), static_cast<size_t>(entries));
          pruned += std::count(candidates[t].begin(), candidates[t].begin() + visible, 0) > 0;
        }
        const uint8_t* mask = uses ? candidates[t].data() : nullptr;
        const auto picks = select_topk_entries(row, visible, mask, c.index_topk);
        std::vector<int32_t> want;
        for (int64_t j = 0; j < k_width; ++j)
          if (hf_topk[t * k_width + j] >= 0) want.push_back(static_cast<int32_t>(hf_topk[t * k_width + j]));
        ASSERT_EQ(picks, want) << "query " << t;
      }
    }
    EXPECT_GT(pruned, 0) << "the candidate mask never removed an entry: level 2 untested";
  }
}

}  // namespace
}  // namespace frank::engine
