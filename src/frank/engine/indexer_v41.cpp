#include "frank/engine/indexer_v41.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace frank::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Indices of the best `k` finite values, best first, ties to the lower index.
std::vector<int32_t> best_finite(const std::vector<float>& values, int k) {
  std::vector<int32_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  const auto better = [&](int32_t a, int32_t b) { return values[a] > values[b] || (values[a] == values[b] && a < b); };
  k = std::min<int>(k, static_cast<int>(order.size()));
  std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
  order.resize(k);
  std::erase_if(order, [&](int32_t i) { return values[i] == kNegInf; });
  return order;
}

}  // namespace

std::vector<uint8_t> select_candidate_blocks(std::span<const float> scores, int visible, int topk_blocks,
                                             int block_size) {
  const int n = static_cast<int>(scores.size());
  const int n_blocks = (n + block_size - 1) / block_size;
  std::vector<float> block_score(n_blocks, kNegInf);
  for (int e = 0; e < std::min(visible, n); ++e) {
    float& block = block_score[e / block_size];
    block = std::max(block, scores[e]);
  }
  // The newest block is only partly filled; pinned so an older full block cannot outscore it.
  if (visible > 0) block_score[(visible - 1) / block_size] = std::numeric_limits<float>::infinity();
  std::vector<uint8_t> mask(n, 0);
  for (int32_t b : best_finite(block_score, topk_blocks))
    std::fill(mask.begin() + b * block_size, mask.begin() + std::min(n, (b + 1) * block_size), uint8_t{1});
  return mask;
}

std::vector<int32_t> select_topk_entries(std::span<const float> scores, int visible, const uint8_t* candidates,
                                         int topk) {
  std::vector<float> reachable(scores.begin(), scores.end());
  for (size_t e = 0; e < reachable.size(); ++e)
    if (static_cast<int>(e) >= visible || (candidates != nullptr && candidates[e] == 0)) reachable[e] = kNegInf;
  auto picks = best_finite(reachable, topk);
  std::sort(picks.begin(), picks.end());
  return picks;
}

}  // namespace frank::engine
