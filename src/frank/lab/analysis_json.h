#pragma once
// The analysis as JSON (`frank lab analyze --json`). Top level: design_id, design_name, metric,
// better, baseline, treatment, then the primary estimand's statistics
//   estimand, blocks [{block, values {arm: mean}, draws {arm: n}, effect}], mean_effect,
//   ci95 [lo, hi] (null with one block), ci_method, sign_test_p, sign_test {better, worse, ties,
//   p_worse}, permutation_p, permutation {method, assignments, samples, p_worse},
// then rule, rule_verdict, rule_reason, band (bands only), guards {drift, quality}, verdict,
// verdict_reason, secondary (the other estimand's statistics, with a covariate) and warnings.
// p-values are one-sided in the design's direction; effects are treatment/baseline - 1.
#include <nlohmann/json.hpp>

#include "frank/lab/analysis.h"
#include "frank/lab/design.h"

namespace frank::lab {

nlohmann::json analysis_to_json(const Design& design, const Analysis& analysis);

}  // namespace frank::lab
