#pragma once
// Rows from a CSV file, for data that did not come through the runner (and for earlier rows of
// a metric). A header line names the columns, in any order:
//   block,arm,value          required: the 0-based block, the arm's name, the metric's value
//   start,draw               optional 0-based integers (default: one start per block and arm,
//                            draws numbered in file order)
//   covariate                optional: the design's covariate
//   any other name           another metric by that name (e.g. a quality guard's)
// Fields are separated by commas, without quoting; spaces around fields are ignored; blank lines
// are skipped.
#include <filesystem>
#include <string>
#include <vector>

#include "frank/lab/row.h"

namespace frank::lab {

// `value` is stored as metric `metric_name`, `covariate` as `covariate_name` (empty: the design has
// no covariate, and a covariate column is an error).
std::vector<Row> read_rows_csv(const std::filesystem::path& path, const std::string& metric_name,
                               const std::string& covariate_name);

}  // namespace frank::lab
