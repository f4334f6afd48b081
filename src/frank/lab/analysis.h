#pragma once
// The analysis of a registered design's rows: checks, the primary estimand's statistics (and
// the other estimand's when a covariate is declared), the rule, the guards and the verdict.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frank/lab/decision.h"
#include "frank/lab/design.h"
#include "frank/lab/effect_summary.h"
#include "frank/lab/guards.h"
#include "frank/lab/row.h"

namespace frank::lab {

struct Analysis {
  std::string design_id;
  EffectSummary primary;
  std::optional<EffectSummary> secondary;  // the other estimand, when a covariate is declared
  RuleOutcome rule;
  std::optional<DriftCheck> drift;
  std::vector<QualityCheck> quality;
  FinalVerdict verdict;
  std::vector<std::string> warnings;  // deviations from the design
};

// The Monte Carlo permutation test's seed: the first 8 bytes, big-endian, of
// SHA-256("<design id>:permutation"), so a re-analysis gives the same p.
uint64_t monte_carlo_seed(const std::string& design_id);

Analysis analyze(const Design& design, const std::string& design_id, std::vector<Row> rows);

}  // namespace frank::lab
