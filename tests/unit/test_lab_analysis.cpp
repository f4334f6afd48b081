// The analysis end to end: verdicts of every rule on data worked by hand, the guards, the
// covariate adjustment and both estimands, the JSON output and the text report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "frank/lab/analysis.h"
#include "frank/lab/analysis_json.h"
#include "frank/lab/design.h"
#include "frank/lab/ledger.h"
#include "frank/lab/registration.h"
#include "frank/lab/report.h"
#include "lab_test_util.h"

namespace frank::lab {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

Analysis run(const json& design_json, const std::vector<Row>& rows) {
  const Design d = parse_design(design_json);
  return analyze(d, design_id(d), rows);
}

json with_rule(json design, json rule) {
  design["decision"] = std::move(rule);
  return design;
}

TEST(LabAnalysis, AllBlocksBetter) {
  const json d = test::small_design();
  EXPECT_EQ(run(d, test::paired_rows({{10, 9}, {10, 9.5}, {12, 11}})).verdict.verdict, Verdict::Adopt);
  EXPECT_EQ(run(d, test::paired_rows({{10, 9}, {10, 10.5}, {12, 11}})).verdict.verdict, Verdict::Inconclusive);
  const Analysis none = run(d, test::paired_rows({{10, 11}, {10, 10}, {12, 13}}));
  EXPECT_EQ(none.verdict.verdict, Verdict::Reject);
  EXPECT_EQ(none.verdict.reason, "none of the 3 blocks improved");
}

TEST(LabAnalysis, SignAndPermutationRules) {
  const auto better = test::paired_rows({{10, 9}, {10, 9.5}, {12, 11}, {11, 10}, {10, 9.9}});
  const auto worse = test::paired_rows({{9, 10}, {9.5, 10}, {11, 12}, {10, 11}, {9.9, 10}});
  const json sign = with_rule(test::small_design(5), {{"kind", "sign_test"}, {"alpha", 0.05}});
  const json perm = with_rule(test::small_design(5), {{"kind", "permutation"}, {"alpha", 0.05}});
  const Analysis a = run(sign, better);
  EXPECT_EQ(a.primary.sign.p_better, 1.0 / 32);
  EXPECT_EQ(a.verdict.verdict, Verdict::Adopt);
  EXPECT_EQ(run(sign, worse).verdict.verdict, Verdict::Reject);
  EXPECT_EQ(run(perm, better).verdict.verdict, Verdict::Adopt);
  EXPECT_EQ(run(perm, worse).verdict.verdict, Verdict::Reject);
  // Higher is better: the same data reads the other way.
  json higher = perm;
  higher["metric"]["better"] = "higher";
  EXPECT_EQ(run(higher, better).verdict.verdict, Verdict::Reject);
  const Analysis mixed = run(perm, test::paired_rows({{10, 9}, {10, 11}, {10, 9.5}, {10, 10.2}, {10, 9.9}}));
  EXPECT_EQ(mixed.verdict.verdict, Verdict::Inconclusive);
}

// Effects -0.10, -0.12, -0.08, -0.10: mean -0.10, sd sqrt(0.0008 / 3), t_{0.975,3} = 3.182446,
// so the improvement's 95% interval is [0.0740, 0.1260].
std::vector<Row> ten_percent_faster() { return test::paired_rows({{10, 9}, {10, 8.8}, {10, 9.2}, {20, 18}}); }

TEST(LabAnalysis, BandsByHand) {
  auto bands = [](double expected, double adopt, double reject) {
    return with_rule(test::small_design(4), {{"kind", "bands"},
                                             {"expected_improvement", expected},
                                             {"adopt_if_lower_at_least", adopt},
                                             {"reject_if_upper_below", reject}});
  };
  const Analysis carried = run(bands(0.1, 0.5, 0.5), ten_percent_faster());
  EXPECT_NEAR(carried.primary.ci95.lower, -0.1259853, 1e-6);
  EXPECT_NEAR(carried.primary.ci95.upper, -0.0740147, 1e-6);
  EXPECT_EQ(carried.rule.band, "carried");  // 0.0740 >= 0.05
  EXPECT_EQ(carried.verdict.verdict, Verdict::Adopt);
  const Analysis excluded = run(bands(0.4, 0.5, 0.5), ten_percent_faster());
  EXPECT_EQ(excluded.rule.band, "excluded");  // 0.1260 < 0.2
  EXPECT_EQ(excluded.verdict.verdict, Verdict::Reject);
  const Analysis seen = run(bands(0.2, 0.5, 0.25), ten_percent_faster());
  EXPECT_EQ(seen.rule.band, "seen");  // 0 < 0.0740 < 0.1 and 0.1260 >= 0.05
  EXPECT_EQ(seen.verdict.verdict, Verdict::Inconclusive);
  const Analysis unclear = run(bands(0.2, 0.5, 0.25), test::paired_rows({{10, 9}, {10, 10.5}, {10, 9.2}, {20, 21}}));
  EXPECT_EQ(unclear.rule.band, "unclear");
}

TEST(LabAnalysis, DriftGuardMakesTheVerdictInconclusive) {
  json d = test::small_design(4);
  d["drift_guard"] = {{"reference_mean", 12.0}, {"max_relative_drift", 0.05}};
  // Baselines 10, 10, 10, 20 average 12.5 but spread far too much to show equivalence.
  const Analysis drifted = run(d, ten_percent_faster());
  EXPECT_EQ(drifted.rule.verdict, Verdict::Adopt);
  EXPECT_FALSE(drifted.drift->pass);
  EXPECT_EQ(drifted.verdict.verdict, Verdict::Inconclusive);
  EXPECT_THAT(drifted.verdict.reason, HasSubstr("drift guard failed"));
  // Baselines 10.0, 10.1, 9.9, 10.0 against 10.0: drifts 0, +1%, -1%, 0; 90% interval
  // +-2.353 * 0.8165% / 2 = +-0.96%, inside +-5%.
  d["drift_guard"]["reference_mean"] = 10.0;
  const Analysis steady = run(d, test::paired_rows({{10, 9}, {10.1, 9.1}, {9.9, 9}, {10, 9.2}}));
  EXPECT_TRUE(steady.drift->pass);
  EXPECT_NEAR(steady.drift->drift.upper, 2.353363434801823 * std::sqrt(2e-4 / 3) / 2, 1e-9);
  EXPECT_EQ(steady.verdict.verdict, Verdict::Adopt);
}

TEST(LabAnalysis, QualityGuardTurnsAdoptIntoReject) {
  json d = test::small_design(4);
  d["quality_guards"] = {{{"metric", "passed"}, {"better", "higher"}, {"scale", "absolute"}, {"margin", 0.1}}};
  auto rows = ten_percent_faster();
  auto with_passed = [&](double base, double treat) {
    for (Row& r : rows) r.metrics["passed"] = r.arm == "main" ? base : treat;
    return rows;
  };
  const Analysis kept = run(d, with_passed(1.0, 1.0));
  EXPECT_TRUE(kept.quality[0].pass);
  EXPECT_EQ(kept.verdict.verdict, Verdict::Adopt);
  const Analysis broke = run(d, with_passed(1.0, 0.5));
  EXPECT_FALSE(broke.quality[0].pass);
  EXPECT_NEAR(broke.quality[0].worsening.mean, 0.5, 1e-15);
  EXPECT_EQ(broke.verdict.verdict, Verdict::Reject);
  EXPECT_THAT(broke.verdict.reason, HasSubstr("quality guard \"passed\" failed"));
}

TEST(LabAnalysis, CovariateAdjustmentMovesDrawsToTheReference) {
  json d = test::small_design(2);
  d["covariate"] = {{"name", "tokens_per_step"},
                    {"reference", 2.0},
                    {"slope", {{"main", 4.0}, {"fast", 2.0}}},
                    {"estimand", "fixed_covariate"}};
  auto rows = test::paired_rows({{10, 9}, {12, 10}});
  const double covariate[] = {2.5, 1.0, 2.0, 3.0};  // main 0, fast 0, main 1, fast 1
  for (size_t i = 0; i < rows.size(); ++i) rows[i].metrics["tokens_per_step"] = covariate[i];
  const Analysis a = run(d, rows);
  // adjusted = value - slope[arm] * (covariate - 2): 10 - 4*0.5 = 8, 9 - 2*(-1) = 11, 12 - 0 = 12, 10 - 2*1 = 8.
  EXPECT_EQ(a.primary.estimand, "fixed_covariate");
  EXPECT_EQ(a.primary.blocks[0].baseline, 8.0);
  EXPECT_EQ(a.primary.blocks[0].treatment, 11.0);
  EXPECT_EQ(a.primary.blocks[1].treatment, 8.0);
  ASSERT_TRUE(a.secondary);
  EXPECT_EQ(a.secondary->estimand, "end_to_end");
  EXPECT_EQ(a.secondary->blocks[0].baseline, 10.0);
  d["covariate"]["estimand"] = "end_to_end";
  const Analysis e2e = run(d, rows);
  EXPECT_EQ(e2e.primary.estimand, "end_to_end");
  EXPECT_EQ(e2e.primary.blocks[0].treatment, 9.0);
  EXPECT_EQ(e2e.secondary->blocks[0].treatment, 11.0);
}

TEST(LabAnalysis, JsonCarriesTheRequiredFields) {
  json dj = test::small_design(4);
  dj["covariate"] = {{"name", "tps"}, {"reference", 2.0}, {"slope", 0.0}, {"estimand", "end_to_end"}};
  auto rows = ten_percent_faster();
  for (Row& r : rows) r.metrics["tps"] = 2.0;
  const Design d = parse_design(dj);
  const Analysis a = analyze(d, design_id(d), rows);
  const json j = analysis_to_json(d, a);
  EXPECT_EQ(j["design_id"], design_id(d));
  ASSERT_EQ(j["blocks"].size(), 4u);
  EXPECT_EQ(j["blocks"][3]["values"]["main"], 20.0);
  EXPECT_EQ(j["blocks"][3]["values"]["fast"], 18.0);
  EXPECT_NEAR(j["blocks"][3]["effect"].get<double>(), -0.1, 1e-15);
  EXPECT_NEAR(j["mean_effect"].get<double>(), -0.1, 1e-15);
  EXPECT_EQ(j["sign_test_p"], 1.0 / 16);
  EXPECT_EQ(j["permutation_p"], 1.0 / 16);
  EXPECT_EQ(j["permutation"]["method"], "exact");
  EXPECT_EQ(j["ci95"].size(), 2u);
  EXPECT_EQ(j["verdict"], "adopt");
  EXPECT_EQ(j["rule"], json({{"kind", "all_blocks_better"}}));
  EXPECT_TRUE(j["guards"]["drift"].is_null());
  EXPECT_EQ(j["secondary"]["estimand"], "fixed_covariate");
  EXPECT_TRUE(j["warnings"].empty());
  // One block: no interval, JSON null.
  const Design one = parse_design(test::small_design(1));
  EXPECT_TRUE(analysis_to_json(one, analyze(one, "x", test::paired_rows({{10, 9}})))["ci95"].is_null());
}

TEST(LabAnalysis, LedgerToReport) {
  const Design d = parse_design(test::small_design(3));
  const std::string id = design_id(d);
  test::TempDir dir;
  std::string ledger;
  const double values[3][2] = {{10, 9}, {10, 9.5}, {12, 11}};
  for (int b = 0; b < 3; ++b)
    for (int a = 0; a < 2; ++a)
      ledger += json({{"design", id},
                      {"block", b},
                      {"arm", a ? "fast" : "main"},
                      {"start", 0},
                      {"draw", 0},
                      {"metrics", {{"time_s", values[b][a]}}}})
                    .dump() +
                "\n";
  test::write_text(dir / "ledger.jsonl", ledger);
  const Analysis a = analyze(d, id, read_ledger(dir / "ledger.jsonl", id));
  const std::string text = analysis_report(d, a);
  EXPECT_THAT(text, HasSubstr("verdict       adopt (all 3 blocks improved)"));
  EXPECT_THAT(text, HasSubstr("p = 0.125 (one-sided, better; exact over 8 assignments)"));
  EXPECT_THAT(text, HasSubstr("-10.00%"));
}

TEST(LabAnalysis, MonteCarloSeedComesFromTheDesignId) {
  EXPECT_EQ(monte_carlo_seed("abc"), monte_carlo_seed("abc"));
  EXPECT_NE(monte_carlo_seed("abc"), monte_carlo_seed("abd"));
}

}  // namespace
}  // namespace frank::lab
