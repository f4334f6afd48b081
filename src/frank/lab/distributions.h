#pragma once
// The few distribution functions the lab's tests and intervals need, in double precision:
// the normal and Student-t CDFs and quantiles, and the binomial(n, 1/2) upper tail.
#include <cstdint>

namespace frank::lab {

// I_x(a, b), the regularized incomplete beta function, a, b > 0, 0 <= x <= 1.
double regularized_incomplete_beta(double a, double b, double x);

double normal_cdf(double x);
double normal_quantile(double p);  // 0 < p < 1

double student_t_cdf(double t, double df);       // df > 0
double student_t_quantile(double p, double df);  // 0 < p < 1, df > 0

// P(X >= k) for X ~ Binomial(n, 1/2), 0 <= n <= 1000: sums C(n, i) / 2^n, exact while C(n, i) < 2^53.
double binomial_half_upper_tail(int64_t n, int64_t k);

}  // namespace frank::lab
