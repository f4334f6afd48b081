#pragma once
// Student-t interval for a mean: mean ± t_{(1+level)/2, n-1} · sd / sqrt(n).
//
// The lab's intervals are over per-block values (effects, drifts, guard differences): blocks are
// the independent, randomized replicates, draws inside a start are not. With the 5 to 20 blocks a
// design can afford, the t-interval is exact for normal block effects and robust to moderate
// skew, while bootstrap percentile intervals are known to under-cover badly at such n.
#include <cstdint>
#include <vector>

namespace frank::lab {

struct MeanInterval {
  int64_t n = 0;
  double mean = 0.0;
  double sd = 0.0;                  // sample standard deviation (n - 1 denominator); 0 when n < 2
  double lower = 0.0, upper = 0.0;  // NaN when n < 2: one block gives no interval
};

MeanInterval t_interval(const std::vector<double>& values, double level);  // throws frank::Error when empty

}  // namespace frank::lab
