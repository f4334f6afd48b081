#include "frank/experts/popularity_calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "frank/core/error.h"

namespace frank::experts {

std::vector<double> zipf_weights(uint32_t n, double exponent, double offset) {
  std::vector<double> w(n);
  for (uint32_t r = 0; r < n; ++r) w[r] = std::pow(r + 1 + offset, -exponent);
  return w;
}

std::vector<double> inclusion_probabilities(const std::vector<double>& weights, uint32_t top_k) {
  auto expected_picks = [&](double lambda) {
    double sum = 0;
    for (double w : weights) sum += -std::expm1(-lambda * w);
    return sum;
  };
  // sum_i pi_i grows from 0 to n with lambda: bracket top_k, then bisect.
  double lo = 0, hi = 1;
  while (expected_picks(hi) < top_k && hi < 1e300) hi *= 2;
  for (int i = 0; i < 64; ++i) {
    const double mid = 0.5 * (lo + hi);
    (expected_picks(mid) < top_k ? lo : hi) = mid;
  }
  std::vector<double> pi(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) pi[i] = -std::expm1(-hi * weights[i]);
  return pi;
}

double hottest_share(const RankingMix& mix, uint32_t top_k, double exponent, double offset, double hot_count) {
  const size_t n = mix.rank_of.front().size();
  const std::vector<double> pi_by_rank =
      inclusion_probabilities(zipf_weights(static_cast<uint32_t>(n), exponent, offset), top_k);
  std::vector<double> share(n, 0.0);
  for (size_t i = 0; i < mix.rank_of.size(); ++i)
    for (size_t e = 0; e < n; ++e) share[e] += mix.weight[i] * pi_by_rank[mix.rank_of[i][e]] / top_k;
  std::sort(share.begin(), share.end(), std::greater<>());
  const auto whole = static_cast<size_t>(hot_count);
  double total = 0;
  for (size_t i = 0; i < whole && i < n; ++i) total += share[i];
  if (whole < n) total += (hot_count - static_cast<double>(whole)) * share[whole];
  return total;
}

double calibrate_exponent(const RankingMix& mix, uint32_t top_k, double offset, double hot_count, double hot_share) {
  double lo = 0, hi = 64;
  const double reachable = hottest_share(mix, top_k, hi, offset, hot_count);
  if (hottest_share(mix, top_k, lo, offset, hot_count) > hot_share || reachable < hot_share)
    throw Error(
        fmt::format("cannot calibrate expert popularity: the hottest {:.1f} experts can receive between "
                    "{:.3f} and {:.3f} of routings, not {:.3f} (fewer phases or a smaller phase shift help)",
                    hot_count, hottest_share(mix, top_k, lo, offset, hot_count), reachable, hot_share));
  for (int i = 0; i < 50; ++i) {
    const double mid = 0.5 * (lo + hi);
    (hottest_share(mix, top_k, mid, offset, hot_count) < hot_share ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace frank::experts
