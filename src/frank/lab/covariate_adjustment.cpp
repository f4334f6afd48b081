#include "frank/lab/covariate_adjustment.h"

#include <fmt/format.h>

#include "frank/core/error.h"

namespace frank::lab {

double draw_value(const Row& row, const Design& d, bool adjusted) {
  const double value = row.metrics.at(d.metric.name);
  if (!adjusted) return value;
  const Covariate& c = *d.covariate;
  const auto covariate = row.metrics.find(c.name);
  if (covariate == row.metrics.end())
    throw Error(fmt::format("{}: no value for covariate \"{}\", which the design adjusts with", row.origin, c.name));
  const auto slope = c.slope.count(row.arm) ? c.slope.at(row.arm) : c.slope.at(d.baseline);
  return value - slope * (covariate->second - c.reference);
}

}  // namespace frank::lab
