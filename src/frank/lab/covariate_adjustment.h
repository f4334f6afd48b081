#pragma once
// A draw's value for an estimand: as measured, or moved to the design's fixed covariate value,
//   adjusted = value - slope[arm] * (covariate - reference)
// (CUPED with the slope fixed in advance instead of estimated from the data).
#include "frank/lab/design.h"
#include "frank/lab/row.h"

namespace frank::lab {

// Rows of an arm the design does not name (earlier rows for planning) take the baseline's slope.
// Throws frank::Error naming the row when it lacks the covariate.
double draw_value(const Row& row, const Design& design, bool adjusted);

}  // namespace frank::lab
