#include "frank/lab/sign_test.h"

#include "frank/lab/distributions.h"

namespace frank::lab {

SignTest sign_test(const std::vector<double>& improvements) {
  SignTest s;
  for (double x : improvements) ++(x > 0.0 ? s.better : x < 0.0 ? s.worse : s.ties);
  const int64_t n = s.better + s.worse;
  s.p_better = binomial_half_upper_tail(n, s.better);
  s.p_worse = binomial_half_upper_tail(n, s.worse);
  return s;
}

}  // namespace frank::lab
