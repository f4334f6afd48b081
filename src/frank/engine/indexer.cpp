#include "frank/engine/indexer.h"

#include <algorithm>
#include <cmath>

#include "frank/cpu/ops.h"

namespace frank::engine {
namespace {

bool selectable(float s) { return !std::isnan(s) && !(std::isinf(s) && s < 0); }

std::vector<int64_t> order_by_score(const std::vector<float>& scores, int64_t k) {
  std::vector<int64_t> idx;
  idx.reserve(scores.size());
  for (int64_t i = 0; i < static_cast<int64_t>(scores.size()); ++i)
    if (selectable(scores[i])) idx.push_back(i);
  k = std::min<int64_t>(k, static_cast<int64_t>(idx.size()));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
  });
  idx.resize(k);
  return idx;
}

}  // namespace

std::vector<float> indexer_scores(const float* q, const float* weight, int heads, int head_dim, const float* keys,
                                  int64_t n_keys) {
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  std::vector<float> out(n_keys);
  for (int64_t w = 0; w < n_keys; ++w) {
    double s = 0.0;
    for (int h = 0; h < heads; ++h) {
      const float d = static_cast<float>(cpu::dot(q + int64_t{h} * head_dim, keys + w * head_dim, head_dim));
      s += static_cast<double>(std::max(d, 0.0f) * scale) * weight[h];
    }
    out[w] = static_cast<float>(s);
  }
  return out;
}

std::vector<int64_t> top_k_indices(const std::vector<float>& scores, int64_t k) { return order_by_score(scores, k); }

bool tie_at_kth(const std::vector<float>& scores, int64_t k) {
  if (k <= 0 || k >= static_cast<int64_t>(scores.size())) return false;
  const auto best = order_by_score(scores, k + 1);
  return best.size() == static_cast<size_t>(k + 1) && scores[best[k - 1]] == scores[best[k]];
}

}  // namespace frank::engine
