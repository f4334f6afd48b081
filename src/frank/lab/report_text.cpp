#include "frank/lab/report_text.h"

#include <fmt/format.h>

#include <cmath>

namespace frank::lab {

std::string signed_percent(double fraction) {
  return std::isnan(fraction) ? "n/a" : fmt::format("{:+.2f}%", 100.0 * fraction);
}

std::string interval_text(const MeanInterval& interval) {
  if (std::isnan(interval.lower)) return "no interval (one block)";
  return fmt::format("[{}, {}]", signed_percent(interval.lower), signed_percent(interval.upper));
}

std::string rule_text(const DecisionRule& rule) {
  switch (rule.kind) {
    case DecisionRule::Kind::AllBlocksBetter: return "all blocks better";
    case DecisionRule::Kind::SignTest: return fmt::format("sign test, alpha {}", rule.alpha);
    case DecisionRule::Kind::Permutation: return fmt::format("permutation test, alpha {}", rule.alpha);
    case DecisionRule::Kind::Bands:
      return fmt::format(
          "bands: expected improvement {}, adopt if lower end >= {} of it, reject if upper end < {} of it",
          signed_percent(rule.expected_improvement), rule.adopt_if_lower_at_least, rule.reject_if_upper_below);
  }
  return "";
}

std::string mean_effect_text(const EffectSummary& summary) {
  return fmt::format("{}  95% CI {} (t-interval over {} blocks)", signed_percent(summary.mean_effect),
                     interval_text(summary.ci95), summary.blocks.size());
}

std::string sign_test_text(const SignTest& sign) {
  return fmt::format("{} better, {} worse, {} tied: p = {:.4g} (one-sided, better)", sign.better, sign.worse, sign.ties,
                     sign.p_better);
}

std::string permutation_text(const PermutationTest& permutation) {
  return fmt::format("p = {:.4g} (one-sided, better; {})", permutation.p_better,
                     permutation.exact ? fmt::format("exact over {:.0f} assignments", permutation.assignments)
                                       : fmt::format("Monte Carlo, {} of {:.4g} assignments", permutation.samples,
                                                     permutation.assignments));
}

std::string drift_text(const DriftCheck& drift) {
  return fmt::format("{}: mean drift {}, 90% CI {}, margin +/-{:.2f}%", drift.pass ? "pass" : "FAIL",
                     signed_percent(drift.drift.mean), interval_text(drift.drift),
                     100.0 * drift.guard.max_relative_drift);
}

std::string quality_text(const QualityCheck& quality) {
  return fmt::format("{}: mean worsening {:.4g}, 95% upper bound {:.4g} vs margin {} ({})",
                     quality.pass ? "pass" : "FAIL", quality.worsening.mean, quality.worsening.upper,
                     quality.guard.margin,
                     quality.guard.scale == QualityGuard::Scale::Absolute ? "absolute" : "relative");
}

}  // namespace frank::lab
