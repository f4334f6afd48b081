#pragma once
// The analysis as one self-contained HTML page (`frank lab analyze --html`): the text report's
// header as a table, then inline SVG plots of the per-block paired values, the block effects with
// the mean effect's 95% interval, and, when the rows carry it, the time breakdown per arm. Inline
// CSS, no JavaScript and no external resources, so the file can be archived next to the ledger
// and opened anywhere.
#include <string>
#include <vector>

#include "frank/lab/analysis.h"
#include "frank/lab/design.h"
#include "frank/lab/row.h"

namespace frank::lab {

// `rows` are the rows the analysis was computed from; the time breakdown is the mean, per arm, of
// their metrics decode_s, cold_ttft_s, warm_ttft_s, tool_s and outside_s (those present).
std::string analysis_html(const Design& design, const Analysis& analysis, const std::vector<Row>& rows);

}  // namespace frank::lab
