#pragma once
// The ledger: the runner appends one JSON object per line (JSONL) for every draw,
//   {"design":"<design id>","block":0,"arm":"baseline","start":0,"draw":0,
//    "metrics":{"task_time_s":41.7,"tokens_per_step":2.31,"passed":1}}
// block, start and draw are 0-based integers; metrics maps names to numbers and holds the
// design's metric, its covariate and its guard metrics (others are carried and ignored). Keys
// other than these (timestamps, a hash chain, ...) are the runner's and ignored here; blank lines
// are skipped. A row of another design is an error, not something to filter out silently.
// Lines with "kind" other than "draw" are the runner's events and are skipped; when the lines carry
// the runner's hash chain ("prev", ledger_writer.h) the chain is verified first.
#include <filesystem>
#include <string>
#include <vector>

#include "frank/lab/row.h"

namespace frank::lab {

std::vector<Row> read_ledger(const std::filesystem::path& path, const std::string& design_id);

}  // namespace frank::lab
