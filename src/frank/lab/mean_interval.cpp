#include "frank/lab/mean_interval.h"

#include <cmath>
#include <limits>

#include "frank/core/error.h"
#include "frank/lab/distributions.h"

namespace frank::lab {

MeanInterval t_interval(const std::vector<double>& values, double level) {
  if (values.empty()) throw Error("an interval needs at least one value");
  MeanInterval r;
  r.n = static_cast<int64_t>(values.size());
  double sum = 0.0;
  for (double v : values) sum += v;
  r.mean = sum / double(r.n);
  if (r.n < 2) {
    r.lower = r.upper = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  double squares = 0.0;
  for (double v : values) squares += (v - r.mean) * (v - r.mean);
  r.sd = std::sqrt(squares / double(r.n - 1));
  const double half_width = student_t_quantile(0.5 + level / 2.0, double(r.n - 1)) * r.sd / std::sqrt(double(r.n));
  r.lower = r.mean - half_width;
  r.upper = r.mean + half_width;
  return r;
}

}  // namespace frank::lab
