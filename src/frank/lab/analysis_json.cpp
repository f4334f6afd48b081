#include "frank/lab/analysis_json.h"

#include <cmath>

namespace frank::lab {
namespace {

using nlohmann::json;

json interval(const MeanInterval& m) {
  if (std::isnan(m.lower)) return nullptr;
  return json::array({m.lower, m.upper});
}

json summary_json(const Design& d, const EffectSummary& s) {
  json j;
  j["estimand"] = s.estimand;
  j["blocks"] = json::array();
  for (const BlockEffect& b : s.blocks)
    j["blocks"].push_back({{"block", b.block},
                           {"values", {{d.baseline, b.baseline}, {d.treatment(), b.treatment}}},
                           {"draws", {{d.baseline, b.baseline_draws}, {d.treatment(), b.treatment_draws}}},
                           {"effect", b.effect}});
  j["mean_effect"] = s.mean_effect;
  j["ci95"] = interval(s.ci95);
  j["ci_method"] = "t-interval over per-block effects";
  j["sign_test_p"] = s.sign.p_better;
  j["sign_test"] = {
      {"better", s.sign.better}, {"worse", s.sign.worse}, {"ties", s.sign.ties}, {"p_worse", s.sign.p_worse}};
  j["permutation_p"] = s.permutation.p_better;
  j["permutation"] = {{"method", s.permutation.exact ? "exact" : "monte_carlo"},
                      {"assignments", s.permutation.assignments},
                      {"samples", s.permutation.samples},
                      {"p_worse", s.permutation.p_worse}};
  return j;
}

json guards_json(const Analysis& a) {
  json drift = nullptr;
  if (a.drift)
    drift = {{"reference_mean", a.drift->guard.reference_mean},
             {"max_relative_drift", a.drift->guard.max_relative_drift},
             {"mean_drift", a.drift->drift.mean},
             {"ci90", interval(a.drift->drift)},
             {"pass", a.drift->pass}};
  json quality = json::array();
  for (const QualityCheck& q : a.quality)
    quality.push_back({{"metric", q.guard.metric},
                       {"better", to_string(q.guard.better)},
                       {"scale", q.guard.scale == QualityGuard::Scale::Absolute ? "absolute" : "relative"},
                       {"margin", q.guard.margin},
                       {"mean_worsening", q.worsening.mean},
                       {"upper_bound95", std::isnan(q.worsening.upper) ? json(nullptr) : json(q.worsening.upper)},
                       {"pass", q.pass}});
  return {{"drift", drift}, {"quality", quality}};
}

}  // namespace

json analysis_to_json(const Design& d, const Analysis& a) {
  json j = {{"design_id", a.design_id}, {"design_name", d.name},
            {"metric", d.metric.name},  {"better", to_string(d.metric.better)},
            {"baseline", d.baseline},   {"treatment", d.treatment()}};
  j.update(summary_json(d, a.primary));
  j["rule"] = design_to_json(d)["decision"];
  j["rule_verdict"] = to_string(a.rule.verdict);
  j["rule_reason"] = a.rule.reason;
  if (!a.rule.band.empty()) j["band"] = a.rule.band;
  j["guards"] = guards_json(a);
  j["verdict"] = to_string(a.verdict.verdict);
  j["verdict_reason"] = a.verdict.reason;
  if (a.secondary) j["secondary"] = summary_json(d, *a.secondary);
  j["warnings"] = a.warnings;
  return j;
}

}  // namespace frank::lab
