#include "frank/lab/analysis.h"

#include "frank/core/sha256.h"
#include "frank/lab/block_starts.h"
#include "frank/lab/covariate_adjustment.h"
#include "frank/lab/row_checks.h"

namespace frank::lab {
namespace {

const char* estimand_name(const Design& d, bool adjusted) {
  if (!d.covariate) return "as_measured";
  return adjusted ? "fixed_covariate" : "end_to_end";
}

std::vector<BlockStarts> metric_blocks(const Design& d, const std::vector<Row>& rows, bool adjusted) {
  return group_blocks(rows, d.baseline, d.treatment(), [&](const Row& row) { return draw_value(row, d, adjusted); });
}

}  // namespace

uint64_t monte_carlo_seed(const std::string& design_id) {
  const Sha256Digest digest = sha256(design_id + ":permutation");
  uint64_t seed = 0;
  for (int i = 0; i < 8; ++i) seed = seed << 8 | digest[i];
  return seed;
}

Analysis analyze(const Design& d, const std::string& design_id, std::vector<Row> rows) {
  Analysis a;
  a.design_id = design_id;
  a.warnings = check_rows(rows, d);
  const uint64_t seed = monte_carlo_seed(design_id);
  const bool adjusted = d.uses_covariate_adjustment();
  const auto blocks = metric_blocks(d, rows, adjusted);
  a.primary = summarize_effects(blocks, d.metric.better, d.monte_carlo_samples, seed, estimand_name(d, adjusted));
  if (d.covariate)
    a.secondary = summarize_effects(metric_blocks(d, rows, !adjusted), d.metric.better, d.monte_carlo_samples, seed,
                                    estimand_name(d, !adjusted));
  a.rule = apply_rule(d.decision, d.metric.better, a.primary);
  if (d.drift_guard) a.drift = check_drift(*d.drift_guard, blocks);
  for (const QualityGuard& g : d.quality_guards) {
    const auto guard_blocks =
        group_blocks(rows, d.baseline, d.treatment(), [&](const Row& row) { return row.metrics.at(g.metric); });
    a.quality.push_back(check_quality(g, guard_blocks));
  }
  a.verdict = apply_guards(a.rule, a.drift, a.quality);
  return a;
}

}  // namespace frank::lab
