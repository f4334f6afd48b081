#include "frank/lab/power.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <tuple>

#include "frank/core/error.h"
#include "frank/lab/covariate_adjustment.h"
#include "frank/lab/distributions.h"

namespace frank::lab {
namespace {

// P(Binomial(n, q) >= c).
double binomial_upper_tail(int64_t n, int64_t c, double q) {
  double tail = 0.0;
  for (int64_t i = c; i <= n; ++i)
    tail += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) + i * std::log(q) +
                     (n - i) * std::log1p(-q));
  return tail;
}

std::optional<double> sign_test_detectable(int64_t k, double alpha, double sd) {
  int64_t needed = 0;  // fewest improved blocks (of k, no ties) with p <= alpha
  while (needed <= k && binomial_half_upper_tail(k, needed) > alpha) ++needed;
  if (needed > k) return std::nullopt;
  double lo = 0.5, hi = 1.0;  // bisection for q: the tail grows with q
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (binomial_upper_tail(k, needed, mid) < kPlanningPower ? lo : hi) = mid;
  }
  return sd * normal_quantile(0.5 * (lo + hi));
}

}  // namespace

NoiseEstimate estimate_noise(const std::vector<Row>& earlier, const Design& d) {
  std::map<std::string, std::pair<double, int64_t>> arm_total;  // sum, draws
  std::map<std::tuple<std::string, int64_t, int64_t>, std::vector<double>> starts;
  NoiseEstimate e;
  double all = 0.0;
  for (const Row& row : earlier) {
    const double v = draw_value(row, d, d.uses_covariate_adjustment());
    arm_total[row.arm].first += v;
    ++arm_total[row.arm].second;
    starts[{row.arm, row.block, row.start}].push_back(v);
    all += v;
  }
  e.rows = static_cast<int64_t>(earlier.size());
  e.starts = static_cast<int64_t>(starts.size());
  const int64_t arms = static_cast<int64_t>(arm_total.size());
  if (e.starts - arms < 1) throw Error("earlier rows: need at least two starts of one arm to estimate the noise");
  e.mean = all / double(e.rows);

  // One-way ANOVA on values relative to their arm's mean (so every arm's mean is 1).
  double within = 0.0, between = 0.0;
  std::map<std::string, double> squared_sizes;
  for (const auto& [key, values] : starts) {
    const auto& [sum, n] = arm_total.at(std::get<0>(key));
    if (!(sum > 0.0)) throw Error(fmt::format("earlier rows: arm \"{}\" has a mean <= 0", std::get<0>(key)));
    const double arm_mean = sum / double(n);
    double start_mean = 0.0;
    for (double v : values) start_mean += v / arm_mean;
    start_mean /= double(values.size());
    for (double v : values) within += (v / arm_mean - start_mean) * (v / arm_mean - start_mean);
    between += double(values.size()) * (start_mean - 1.0) * (start_mean - 1.0);
    squared_sizes[std::get<0>(key)] += double(values.size()) * double(values.size());
  }
  const double between_ms = between / double(e.starts - arms);
  e.separated = e.rows > e.starts;
  if (e.separated) {
    e.draw_variance = within / double(e.rows - e.starts);
    double n0 = double(e.rows);
    for (const auto& [arm, squares] : squared_sizes) n0 -= squares / double(arm_total.at(arm).second);
    n0 /= double(e.starts - arms);
    e.start_variance = std::max(0.0, (between_ms - e.draw_variance) / n0);
  } else {
    e.start_variance = between_ms;
  }
  const double s = double(d.starts_per_arm), draws = double(d.draws_per_start);
  e.block_effect_sd = std::sqrt(2.0 * (e.start_variance / s + e.draw_variance / (s * draws)));
  return e;
}

std::optional<double> detectable_improvement(const Design& d, double sd) {
  const int64_t k = d.blocks;
  const DecisionRule& rule = d.decision;
  switch (rule.kind) {
    case DecisionRule::Kind::AllBlocksBetter: return sd * normal_quantile(std::pow(kPlanningPower, 1.0 / double(k)));
    case DecisionRule::Kind::SignTest: return sign_test_detectable(k, rule.alpha, sd);
    case DecisionRule::Kind::Permutation:
      if (k < 2) return std::nullopt;
      return (student_t_quantile(1.0 - rule.alpha, double(k - 1)) + student_t_quantile(kPlanningPower, double(k - 1))) *
             sd / std::sqrt(double(k));
    case DecisionRule::Kind::Bands:
      if (k < 2) return std::nullopt;
      return rule.adopt_if_lower_at_least * rule.expected_improvement +
             (student_t_quantile(0.975, double(k - 1)) + student_t_quantile(kPlanningPower, double(k - 1))) * sd /
                 std::sqrt(double(k));
  }
  return std::nullopt;
}

}  // namespace frank::lab
