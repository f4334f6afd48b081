#include "frank/lab/fidelity.h"

#include <algorithm>
#include <cmath>

#include "frank/core/error.h"

namespace frank::lab {
namespace {

// One side's probabilities over the categories U (in `tokens` order) followed by the tail bucket.
std::vector<double> categorical(const TopLogprobs& side, const std::vector<int32_t>& tokens) {
  double known = 0, smallest = 1;
  for (const auto& [id, lp] : side) {
    known += std::exp(lp);
    smallest = std::min(smallest, std::exp(lp));
  }
  const double rest = std::max(0.0, 1 - known);
  int64_t missing = 0;
  for (int32_t t : tokens) missing += side.count(t) == 0;
  const double share = std::min(smallest, rest / static_cast<double>(missing + 1));
  std::vector<double> p;
  p.reserve(tokens.size() + 1);
  for (int32_t t : tokens) {
    const auto it = side.find(t);
    p.push_back(it == side.end() ? share : std::exp(it->second));
  }
  p.push_back(std::max(0.0, rest - share * static_cast<double>(missing)));
  return p;
}

}  // namespace

double top_k_kl(const TopLogprobs& reference, const TopLogprobs& candidate) {
  if (reference.empty() || candidate.empty()) throw Error("a position without log-probabilities cannot be compared");
  std::vector<int32_t> tokens;
  for (const auto& [id, lp] : reference) tokens.push_back(id);
  for (const auto& [id, lp] : candidate)
    if (!reference.count(id)) tokens.push_back(id);
  const auto p = categorical(reference, tokens), q = categorical(candidate, tokens);
  // Zero-probability categories: 0 log 0 = 0; a category the candidate gives no mass gets a floor
  // (1e-30), so the proxy stays finite and large rather than infinite.
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] > 0) kl += p[i] * (std::log(p[i]) - std::log(std::max(q[i], 1e-30)));
  return std::max(0.0, kl);
}

int32_t top1(const TopLogprobs& logprobs) {
  if (logprobs.empty()) throw Error("a position without log-probabilities has no top token");
  // The map is ordered by id, so the first maximum found is the lowest id among ties.
  return std::max_element(logprobs.begin(), logprobs.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

PositionComparison compare_position(const TopLogprobs& reference, const TopLogprobs& candidate) {
  return {top_k_kl(reference, candidate), top1(reference) == top1(candidate)};
}

ComparisonSummary summarize(const std::vector<PositionComparison>& positions) {
  ComparisonSummary s;
  s.positions = static_cast<int64_t>(positions.size());
  if (positions.empty()) return s;
  std::vector<double> kls;
  int64_t agree = 0;
  for (const auto& p : positions) {
    kls.push_back(p.kl);
    agree += p.top1_agrees;
  }
  std::sort(kls.begin(), kls.end());
  double sum = 0;
  for (double k : kls) sum += k;
  s.mean_kl = sum / static_cast<double>(kls.size());
  s.top1_agreement = static_cast<double>(agree) / static_cast<double>(kls.size());
  // Quantiles by the nearest-rank method: the smallest value with at least q of the positions at or below it.
  for (double q : {0.5, 0.9, 0.99, 0.999, 1.0}) {
    const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(kls.size())));
    s.kl_quantiles.emplace_back(q, kls[std::max<size_t>(rank, 1) - 1]);
  }
  return s;
}

}  // namespace frank::lab
