#include "frank/lab/minimum_p.h"

#include <algorithm>
#include <cmath>

namespace frank::lab {

double sign_test_minimum_p(int64_t blocks) { return std::ldexp(1.0, -static_cast<int>(blocks)); }

double permutation_assignments(int64_t blocks, int64_t starts_per_arm) {
  double per_block = 1.0;  // C(2s, s), exact in double
  for (int64_t i = 1; i <= starts_per_arm; ++i) per_block = per_block * double(starts_per_arm + i) / double(i);
  return std::pow(per_block, double(blocks));
}

double permutation_minimum_p(int64_t blocks, int64_t starts_per_arm, int64_t monte_carlo_samples) {
  const double assignments = permutation_assignments(blocks, starts_per_arm);
  if (assignments <= kMaxExactAssignments) return 1.0 / assignments;
  return std::max(1.0 / assignments, 1.0 / double(1 + monte_carlo_samples));
}

}  // namespace frank::lab
