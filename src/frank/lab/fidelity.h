#pragma once
// The math of the fidelity screen: two engines' next-token distributions at the same positions,
// each known only by its top-K log-probabilities (what an OpenAI-compatible API returns), compared
// by a KL divergence proxy and top-1 agreement, summarised per item group.
//
// Top-K KL proxy, for distributions P (reference) and Q known on their top-K sets K_P and K_Q:
// the categories are U = K_P ∪ K_Q plus one tail bucket. A side's probability of a token in U that
// is outside its own top-K is unknown but at most its K-th probability; such tokens share the side's
// remaining mass r = 1 - (mass of its top-K) equally with the bucket, capped at the K-th
// probability: each gets min(p_K, r / (n + 1)) for n such tokens, the bucket keeps the rest.
// KL(P||Q) is then summed over U and the bucket. Identical top-K lists give exactly 0; with K = the
// vocabulary size it is the exact KL.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace frank::lab {

using TopLogprobs = std::map<int32_t, double>;  // token id -> log-probability

struct PositionComparison {
  double kl = 0;             // the top-K proxy of KL(reference || candidate), nats
  bool top1_agrees = false;  // same most likely token (ties: the lower id)
};

double top_k_kl(const TopLogprobs& reference, const TopLogprobs& candidate);
int32_t top1(const TopLogprobs& logprobs);
PositionComparison compare_position(const TopLogprobs& reference, const TopLogprobs& candidate);

struct ComparisonSummary {
  int64_t positions = 0;
  double mean_kl = 0, top1_agreement = 0;
  std::vector<std::pair<double, double>> kl_quantiles;  // (q, value) for q = 0.5, 0.9, 0.99, 0.999, 1
};

ComparisonSummary summarize(const std::vector<PositionComparison>& positions);

}  // namespace frank::lab
