#include "frank/lab/decision.h"

#include <fmt/format.h>

namespace frank::lab {
namespace {

RuleOutcome all_blocks_better(const EffectSummary& s) {
  const int64_t k = static_cast<int64_t>(s.blocks.size());
  if (s.sign.better == k) return {Verdict::Adopt, fmt::format("all {} blocks improved", k), ""};
  if (s.sign.better == 0) return {Verdict::Reject, fmt::format("none of the {} blocks improved", k), ""};
  return {Verdict::Inconclusive, fmt::format("{} of {} blocks improved", s.sign.better, k), ""};
}

RuleOutcome by_p_value(const char* test, double p_better, double p_worse, double alpha) {
  if (p_better <= alpha)
    return {Verdict::Adopt, fmt::format("{} p = {:.4g} <= alpha = {} (better)", test, p_better, alpha), ""};
  if (p_worse <= alpha)
    return {Verdict::Reject, fmt::format("{} p = {:.4g} <= alpha = {} (worse)", test, p_worse, alpha), ""};
  return {Verdict::Inconclusive,
          fmt::format("{} p = {:.4g} (better), {:.4g} (worse), neither <= alpha = {}", test, p_better, p_worse, alpha),
          ""};
}

RuleOutcome bands(const DecisionRule& rule, Better better, const EffectSummary& s) {
  // The improvement interval is the effect interval, mirrored when lower is better.
  const double lo = better == Better::Lower ? -s.ci95.upper : s.ci95.lower;
  const double hi = better == Better::Lower ? -s.ci95.lower : s.ci95.upper;
  const double adopt_at = rule.adopt_if_lower_at_least * rule.expected_improvement;
  const double reject_below = rule.reject_if_upper_below * rule.expected_improvement;
  auto percent = [](double x) { return fmt::format("{:+.2f}%", 100.0 * x); };
  const std::string interval = fmt::format("95% interval of the improvement [{}, {}]", percent(lo), percent(hi));
  if (lo >= adopt_at)
    return {Verdict::Adopt,
            fmt::format("{}: lower end >= {} (expected {})", interval, percent(adopt_at),
                        percent(rule.expected_improvement)),
            "carried"};
  if (hi < reject_below)
    return {Verdict::Reject, fmt::format("{}: upper end < {}", interval, percent(reject_below)), "excluded"};
  if (lo > 0.0) return {Verdict::Inconclusive, fmt::format("{}: improvement seen, not carried", interval), "seen"};
  return {Verdict::Inconclusive, fmt::format("{}: unclear", interval), "unclear"};
}

}  // namespace

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::Adopt: return "adopt";
    case Verdict::Reject: return "reject";
    case Verdict::Inconclusive: return "inconclusive";
  }
  return "";
}

RuleOutcome apply_rule(const DecisionRule& rule, Better better, const EffectSummary& s) {
  switch (rule.kind) {
    case DecisionRule::Kind::AllBlocksBetter: return all_blocks_better(s);
    case DecisionRule::Kind::SignTest: return by_p_value("sign test", s.sign.p_better, s.sign.p_worse, rule.alpha);
    case DecisionRule::Kind::Permutation:
      return by_p_value("permutation test", s.permutation.p_better, s.permutation.p_worse, rule.alpha);
    case DecisionRule::Kind::Bands: return bands(rule, better, s);
  }
  return {};
}

FinalVerdict apply_guards(const RuleOutcome& rule, const std::optional<DriftCheck>& drift,
                          const std::vector<QualityCheck>& quality) {
  if (drift && !drift->pass)
    return {Verdict::Inconclusive,
            fmt::format("drift guard failed (rule said {}: {})", to_string(rule.verdict), rule.reason)};
  if (rule.verdict == Verdict::Adopt)
    for (const QualityCheck& q : quality)
      if (!q.pass)
        return {Verdict::Reject,
                fmt::format("quality guard \"{}\" failed (rule said adopt: {})", q.guard.metric, rule.reason)};
  return {rule.verdict, rule.reason};
}

}  // namespace frank::lab
