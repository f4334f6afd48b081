#pragma once
// Axis scaling for the HTML report's plots: a data range widened to "nice" tick values, steps of
// 1, 2 or 5 times a power of ten (Heckbert, "Nice numbers for graph labels", Graphics Gems 1990),
// so that tick labels read 0, 0.5, 1.0 rather than 0.037, 0.531, 1.025.
#include <string>
#include <vector>

namespace frank::lab {

struct AxisScale {
  double lower = 0.0, upper = 1.0;  // the axis spans [lower, upper], both multiples of step
  double step = 1.0;

  std::vector<double> ticks() const;           // lower, lower + step, ..., upper
  double fraction(double value) const;         // 0 at lower, 1 at upper
  std::string tick_label(double value) const;  // as many decimals as the step needs
};

// An axis covering [minimum, maximum] with at most about `max_ticks` ticks. An empty range
// (minimum == maximum) is widened around its value, so that a single value still gets an axis.
AxisScale nice_axis(double minimum, double maximum, int max_ticks = 6);

}  // namespace frank::lab
