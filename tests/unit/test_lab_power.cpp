// The planning estimate: variance components from earlier rows and the detectable improvement
// per rule, against the numpy/scipy fixture and a case worked by hand.
#include <gtest/gtest.h>

#include "frank/core/error.h"
#include "frank/lab/design.h"
#include "frank/lab/power.h"
#include "lab_test_util.h"

namespace frank::lab {
namespace {

using nlohmann::json;

std::vector<Row> earlier_rows(const json& rows) {
  std::vector<Row> out;
  for (const auto& r : rows) out.push_back(test::make_row(r[1], r[0], r[2], 0, int64_t(out.size())));
  return out;
}

TEST(LabPower, MatchesTheFixture) {
  const json fixture = test::lab_fixture("power.json");
  const auto rows = earlier_rows(fixture.at("rows"));
  for (const auto& c : fixture.at("cases")) {
    json j = test::small_design(c.at("blocks"));
    j["starts_per_arm"] = c.at("starts_per_arm");
    j["draws_per_start"] = c.at("draws_per_start");
    j["decision"] = c.at("decision");
    const Design d = parse_design(j);
    SCOPED_TRACE(c.at("decision").dump());
    const NoiseEstimate e = estimate_noise(rows, d);
    EXPECT_TRUE(e.separated);
    EXPECT_EQ(e.rows, int64_t(rows.size()));
    EXPECT_EQ(e.starts, 9);
    EXPECT_NEAR(e.mean, fixture.at("mean"), 1e-12);
    EXPECT_NEAR(e.start_variance, fixture.at("start_variance"), 1e-15);
    EXPECT_NEAR(e.draw_variance, fixture.at("draw_variance"), 1e-15);
    EXPECT_NEAR(e.block_effect_sd, c.at("block_effect_sd"), 1e-13);
    const auto delta = detectable_improvement(d, e.block_effect_sd);
    ASSERT_TRUE(delta);
    EXPECT_NEAR(*delta, c.at("detectable"), 1e-10);
  }
}

TEST(LabPower, OneDrawPerStartCannotSeparateTheLevels) {
  const json fixture = test::lab_fixture("power.json");
  const NoiseEstimate e =
      estimate_noise(earlier_rows(fixture.at("single_draw_rows")), parse_design(test::small_design()));
  EXPECT_FALSE(e.separated);
  EXPECT_EQ(e.draw_variance, 0.0);
  EXPECT_NEAR(e.start_variance, fixture.at("single_draw_start_variance"), 1e-15);
}

TEST(LabPower, TwoStartsByHand) {
  // Starts at 9 and 11 (mean 10): relative 0.9 and 1.1, between-start variance 0.02, so one block's
  // effect has sd sqrt(2 * 0.02) = 0.2; one block all better with 80% power needs 0.2 * z_0.8.
  const Design d = parse_design(test::small_design(1));
  const NoiseEstimate e = estimate_noise({test::make_row(0, "old", 9), test::make_row(1, "old", 11)}, d);
  EXPECT_NEAR(e.start_variance, 0.02, 1e-15);
  EXPECT_NEAR(e.block_effect_sd, 0.2, 1e-15);
  EXPECT_NEAR(*detectable_improvement(d, e.block_effect_sd), 0.2 * 0.8416212335729143, 1e-12);
}

TEST(LabPower, UnreachableAndUnusableCases) {
  EXPECT_THROW(
      estimate_noise({test::make_row(0, "old", 9), test::make_row(0, "new", 11)}, parse_design(test::small_design())),
      Error);
  json j = test::small_design(5);
  j["decision"] = {{"kind", "sign_test"}, {"alpha", 0.04}};  // 5 of 5 gives 1/32 = 0.031 <= 0.04
  EXPECT_TRUE(detectable_improvement(parse_design(j), 0.05));
  json adjusted = test::small_design();
  adjusted["covariate"] = {{"name", "tps"}, {"reference", 2.0}, {"slope", 1.0}, {"estimand", "fixed_covariate"}};
  EXPECT_THROW(estimate_noise({test::make_row(0, "old", 9), test::make_row(1, "old", 11)}, parse_design(adjusted)),
               Error);
}

}  // namespace
}  // namespace frank::lab
