#include "frank/lab/svg_axis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace frank::lab {
namespace {

// The nice number (1, 2, 5 or 10 times a power of ten) nearest to x (`round`) or at least x.
double nice_number(double x, bool round) {
  const double power = std::pow(10.0, std::floor(std::log10(x)));
  const double fraction = x / power;
  double nice = 10.0;
  if (round)
    nice = fraction < 1.5 ? 1.0 : fraction < 3.0 ? 2.0 : fraction < 7.0 ? 5.0 : 10.0;
  else
    nice = fraction <= 1.0 ? 1.0 : fraction <= 2.0 ? 2.0 : fraction <= 5.0 ? 5.0 : 10.0;
  return nice * power;
}

}  // namespace

std::vector<double> AxisScale::ticks() const {
  // Counted in whole steps, not accumulated, so that rounding cannot add or drop the last tick.
  const auto steps = static_cast<int64_t>(std::llround((upper - lower) / step));
  std::vector<double> values;
  for (int64_t i = 0; i <= steps; ++i) {
    const double value = lower + double(i) * step;
    values.push_back(std::abs(value) < step * 1e-9 ? 0.0 : value);  // no "-0.0" label
  }
  return values;
}

double AxisScale::fraction(double value) const { return (value - lower) / (upper - lower); }

std::string AxisScale::tick_label(double value) const {
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  return fmt::format("{:.{}f}", value, decimals);
}

AxisScale nice_axis(double minimum, double maximum, int max_ticks) {
  if (!(maximum > minimum)) {
    const double pad = minimum == 0.0 ? 1.0 : std::abs(minimum) * 0.1;
    minimum -= pad;
    maximum += pad;
  }
  const double range = nice_number(maximum - minimum, false);
  AxisScale axis;
  axis.step = nice_number(range / double(std::max(1, max_ticks - 1)), true);
  axis.lower = std::floor(minimum / axis.step) * axis.step;
  axis.upper = std::ceil(maximum / axis.step) * axis.step;
  return axis;
}

}  // namespace frank::lab
