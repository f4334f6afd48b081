#include "frank/lab/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "frank/lab/report_text.h"

namespace frank::lab {
namespace {

void append_summary(std::string& out, const Design& d, const EffectSummary& s) {
  out += fmt::format("{:>6}  {:>14}  {:>14}  {:>9}\n", "block", d.baseline, d.treatment(), "effect");
  for (const BlockEffect& b : s.blocks)
    out +=
        fmt::format("{:>6}  {:>14.6g}  {:>14.6g}  {:>9}\n", b.block, b.baseline, b.treatment, signed_percent(b.effect));
  out += fmt::format("mean effect   {}\n", mean_effect_text(s));
  out += fmt::format("sign test     {}\n", sign_test_text(s.sign));
  out += fmt::format("permutation   {}\n", permutation_text(s.permutation));
}

}  // namespace

std::string registration_report(const Design& d, const Registration& r, const std::optional<NoiseEstimate>& noise) {
  std::string out;
  out += fmt::format("design        {}\n", d.name);
  out += fmt::format("design id     {}\n", r.design_id);
  out += fmt::format("arms          baseline {}, treatment {}\n", d.baseline, d.treatment());
  out += fmt::format("metric        {} ({} is better)\n", d.metric.name, to_string(d.metric.better));
  out += fmt::format("blocks        {} x {} start(s) per arm x {} draw(s) per start\n", d.blocks, d.starts_per_arm,
                     d.draws_per_start);
  out += fmt::format("rule          {}\n", rule_text(d.decision));
  out +=
      fmt::format("start order   ({})\n", d.sequence ? "fixed by the design's sequence" : "derived from the design id");
  for (size_t b = 0; b < r.block_orders.size(); ++b)
    out += fmt::format("  block {:>3}:  {}\n", b, fmt::join(r.block_orders[b], " "));
  out += fmt::format("smallest p    sign test {:.4g} ({} blocks); permutation {:.4g} ({:.4g} assignments, {})\n",
                     r.sign_test_minimum_p, d.blocks, r.permutation_minimum_p, r.permutation_assignments,
                     r.permutation_exact ? "exact" : fmt::format("Monte Carlo with {} samples", d.monte_carlo_samples));
  if (!noise) {
    out += "detectable    give --baseline-rows CSV (earlier rows of the metric) for a planning estimate\n";
    return out;
  }
  out += fmt::format(
      "earlier rows  {} rows, {} starts, mean {:.6g} (a drift_guard.reference_mean if they are the "
      "baseline's)\n",
      noise->rows, noise->starts, noise->mean);
  out += fmt::format("noise         relative sd between starts {:.3g}%, ", 100.0 * std::sqrt(noise->start_variance));
  out += noise->separated ? fmt::format("between draws {:.3g}%\n", 100.0 * std::sqrt(noise->draw_variance))
                          : "draws not separable (one draw per start)\n";
  const auto delta = detectable_improvement(d, noise->block_effect_sd);
  out += fmt::format("detectable    {} (planning estimate: {:.0f}% power, block-effect sd {:.3g}%)\n",
                     delta ? fmt::format("an improvement of {:.3g}%", 100.0 * *delta) : "none: the rule cannot adopt",
                     100.0 * kPlanningPower, 100.0 * noise->block_effect_sd);
  return out;
}

std::string analysis_report(const Design& d, const Analysis& a) {
  std::string out;
  out += fmt::format("design        {} ({})\n", d.name, a.design_id);
  out += fmt::format("metric        {} ({} is better), estimand {}\n\n", d.metric.name, to_string(d.metric.better),
                     a.primary.estimand);
  append_summary(out, d, a.primary);
  out += fmt::format("rule          {}: {} ({})\n", rule_text(d.decision), to_string(a.rule.verdict), a.rule.reason);
  if (a.drift) out += fmt::format("drift guard   {}\n", drift_text(*a.drift));
  for (const QualityCheck& q : a.quality) out += fmt::format("quality guard {}: {}\n", q.guard.metric, quality_text(q));
  if (a.secondary) {
    out += fmt::format("\nsecondary estimand {} (reported, not decided on):\n", a.secondary->estimand);
    append_summary(out, d, *a.secondary);
  }
  for (const std::string& w : a.warnings) out += fmt::format("warning       {}\n", w);
  out += fmt::format("\nverdict       {} ({})\n", to_string(a.verdict.verdict), a.verdict.reason);
  return out;
}

}  // namespace frank::lab
