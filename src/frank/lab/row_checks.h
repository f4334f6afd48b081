#pragma once
// Rows checked against their design before any statistics. Rows the design cannot have produced
// (unknown arm, block or start out of range, a duplicate draw, a missing metric, a block with only
// one arm) are errors. Departures that leave the analysis possible (a registered block without
// rows, a start with a different number of draws) come back as warnings for the report:
// pre-registration makes them deviations to be shown, not to be fixed silently.
#include <string>
#include <vector>

#include "frank/lab/design.h"
#include "frank/lab/row.h"

namespace frank::lab {

// Drops the rows of blocks that have only one arm (reported as a deviation) and returns the
// deviations; throws on rows the design cannot have produced.
std::vector<std::string> check_rows(std::vector<Row>& rows, const Design& design);

}  // namespace frank::lab
