#pragma once
// One draw as the analysis sees it, whichever file it came from (ledger.h, rows_csv.h).
#include <cstdint>
#include <map>
#include <string>

namespace frank::lab {

struct Row {
  int64_t block = 0;
  std::string arm;
  int64_t start = 0;                      // which start of this arm in this block, 0-based
  int64_t draw = 0;                       // which draw of that start, 0-based
  std::map<std::string, double> metrics;  // the metric, the covariate and guard metrics, by name
  std::string origin;                     // "file:line", for error messages
};

}  // namespace frank::lab
