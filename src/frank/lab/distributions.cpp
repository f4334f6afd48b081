#include "frank/lab/distributions.h"

#include <cmath>
#include <limits>

namespace frank::lab {
namespace {

// Continued fraction for I_x(a, b) (Numerical Recipes §6.4, modified Lentz): converges quickly
// for x < (a + 1) / (a + b + 2); the caller uses the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) otherwise.
double beta_continued_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300;
  constexpr double eps = 1e-16;
  auto guard = [](double v) { return std::abs(v) < tiny ? tiny : v; };
  double c = 1.0;
  double d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0));
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a - 1.0 + m2) * (a + m2));  // even step
    d = 1.0 / guard(1.0 + aa * d);
    c = guard(1.0 + aa / c);
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1.0 + m2));  // odd step
    d = 1.0 / guard(1.0 + aa * d);
    c = guard(1.0 + aa / c);
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1.0) < eps) break;
  }
  return h;
}

// x < 0 with cdf(x) = p for a continuous increasing cdf with cdf(0) = 1/2 and 0 < p < 1/2: doubling
// finds a bracket, bisection closes it to the last bit the cdf resolves.
template <class Cdf>
double lower_quantile(Cdf cdf, double p) {
  double lo = -1.0, hi = 0.0;
  while (cdf(lo) > p) {
    hi = lo;
    lo *= 2.0;
  }
  for (int i = 0; i < 2000; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (mid == lo || mid == hi) break;
    (cdf(mid) > p ? hi : lo) = mid;
  }
  return 0.5 * (lo + hi);
}

// Quantiles of a distribution symmetric about 0, from its lower half.
template <class Cdf>
double symmetric_quantile(Cdf cdf, double p) {
  if (!(p > 0.0 && p < 1.0)) return std::numeric_limits<double>::quiet_NaN();
  if (p == 0.5) return 0.0;
  return p < 0.5 ? lower_quantile(cdf, p) : -lower_quantile(cdf, 1.0 - p);
}

}  // namespace

double regularized_incomplete_beta(double a, double b, double x) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  // x^a (1-x)^b / B(a, b), the prefactor of the continued fraction.
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_continued_fraction(a, b, x) / a;
  return 1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b;
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double normal_quantile(double p) { return symmetric_quantile(normal_cdf, p); }

// P(T <= t) = 1/2 I_{df/(df+t^2)}(df/2, 1/2) for t <= 0. For small |t| the same tail is written with
// the complementary argument t^2/(df+t^2), computed directly so nothing cancels.
double student_t_cdf(double t, double df) {
  const double t2 = t * t;
  const double x = df / (df + t2);
  const double lower_tail = x < 0.5 ? 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, x)
                                    : 0.5 * (1.0 - regularized_incomplete_beta(0.5, df / 2.0, t2 / (df + t2)));
  return t <= 0.0 ? lower_tail : 1.0 - lower_tail;
}

double student_t_quantile(double p, double df) {
  return symmetric_quantile([df](double t) { return student_t_cdf(t, df); }, p);
}

double binomial_half_upper_tail(int64_t n, int64_t k) {
  if (k <= 0) return 1.0;
  if (k > n) return 0.0;
  double choose = 1.0;  // C(n, i)
  double tail = 0.0;
  for (int64_t i = 0; i <= n; ++i) {
    if (i > 0) choose = choose * double(n - i + 1) / double(i);
    if (i >= k) tail += choose;
  }
  return std::ldexp(tail, -static_cast<int>(n));
}

}  // namespace frank::lab
