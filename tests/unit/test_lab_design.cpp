// Design files: parsing with defaults, the registered (canonical) form and its id against
// Python's hashlib, the hash-derived start order against the fixture's independent derivation,
// the smallest reachable p-values, and bad designs that must name the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "frank/core/error.h"
#include "frank/lab/arm_order.h"
#include "frank/lab/canonical_json.h"
#include "frank/lab/design.h"
#include "frank/lab/minimum_p.h"
#include "frank/lab/registration.h"
#include "lab_test_util.h"

namespace frank::lab {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(LabDesign, SmallDesignTakesDefaults) {
  const Design d = parse_design(test::small_design());
  EXPECT_EQ(d.baseline, "main");
  EXPECT_EQ(d.treatment(), "fast");
  EXPECT_EQ(d.blocks, 3);
  EXPECT_EQ(d.starts_per_arm, 1);
  EXPECT_EQ(d.monte_carlo_samples, 100000);
  EXPECT_EQ(d.description, "");
  EXPECT_TRUE(d.quality_guards.empty());
  EXPECT_FALSE(d.covariate || d.drift_guard || d.sequence);
  EXPECT_EQ(d.metric.better, Better::Lower);
}

TEST(LabDesign, RegisteredFormAndIdMatchPython) {
  for (const auto& c : test::lab_fixture("designs.json")) {
    const Design d = parse_design(c.at("design"));
    const Registration r = register_design(d);
    EXPECT_EQ(r.canonical, c.at("canonical").get<std::string>());
    EXPECT_EQ(r.design_id, c.at("design_id").get<std::string>());
    EXPECT_EQ(design_id(d), r.design_id);
    EXPECT_EQ(r.block_orders, c.at("block_orders").get<std::vector<std::vector<std::string>>>()) << d.name;
  }
}

TEST(LabDesign, IdIgnoresLayoutButNotContent) {
  json j = test::small_design();
  const std::string id = design_id(parse_design(j));
  // The same design re-read from its registered form, and from text with other spacing and key order.
  EXPECT_EQ(design_id(parse_design(json::parse(canonical_json(design_to_json(parse_design(j)))))), id);
  EXPECT_EQ(design_id(parse_design(json::parse(j.dump(4)))), id);
  j["starts_per_arm"] = 1;  // an explicit default is the same design
  EXPECT_EQ(design_id(parse_design(j)), id);
  j["blocks"] = 4;
  EXPECT_NE(design_id(parse_design(j)), id);
}

TEST(LabDesign, ScalarSlopeAppliesToEveryArm) {
  json j = test::small_design();
  j["covariate"] = {{"name", "tokens_per_step"}, {"reference", 2}, {"slope", -1.5}, {"estimand", "end_to_end"}};
  const Design d = parse_design(j);
  EXPECT_EQ(d.covariate->slope.at("main"), -1.5);
  EXPECT_EQ(d.covariate->slope.at("fast"), -1.5);
  EXPECT_FALSE(d.uses_covariate_adjustment());
  EXPECT_EQ(design_to_json(d)["covariate"]["slope"], json({{"fast", -1.5}, {"main", -1.5}}));
  EXPECT_EQ(canonical_json(design_to_json(d)["covariate"]["reference"]), "2.0");
}

TEST(LabDesign, HashedOrderStartsEveryArmAsOftenAsDesigned) {
  json j = test::small_design(20);
  j["starts_per_arm"] = 3;
  const Design d = parse_design(j);
  const auto orders = block_orders(d, design_id(d));
  ASSERT_EQ(orders.size(), 20u);
  std::set<std::vector<std::string>> distinct;
  for (const auto& order : orders) {
    ASSERT_EQ(order.size(), 6u);
    EXPECT_EQ(std::count(order.begin(), order.end(), "main"), 3);
    distinct.insert(order);
  }
  EXPECT_GT(distinct.size(), 5u);  // 20 draws from C(6, 3) = 20 orders
  EXPECT_EQ(block_orders(d, design_id(d)), orders);
  EXPECT_NE(hashed_block_order(std::string(64, '0'), 0, {"a", "b", "c", "d", "e", "f", "g", "h"}, 1),
            hashed_block_order(std::string(64, '1'), 0, {"a", "b", "c", "d", "e", "f", "g", "h"}, 1));
}

TEST(LabDesign, FixedSequenceReplacesTheHashedOrder) {
  json j = test::small_design();
  j.erase("blocks");
  j["sequence"] = json::parse(R"([["main", "fast"], ["fast", "main"], ["fast", "main"], ["main", "fast"]])");
  const Design d = parse_design(j);
  EXPECT_EQ(d.blocks, 4);
  EXPECT_EQ(register_design(d).block_orders, j["sequence"].get<std::vector<std::vector<std::string>>>());
  EXPECT_EQ(design_to_json(d)["blocks"], 4);
}

TEST(LabDesign, SmallestReachablePValues) {
  // Worked by hand: 3 blocks all better -> 0.5^3; 3 blocks of 2 labels -> 2^3 = 8 assignments.
  EXPECT_EQ(sign_test_minimum_p(3), 0.125);
  EXPECT_EQ(permutation_assignments(3, 1), 8.0);
  EXPECT_EQ(permutation_minimum_p(3, 1, 100000), 0.125);
  // Two starts per arm: C(4, 2) = 6 labellings per block.
  EXPECT_EQ(permutation_assignments(3, 2), 216.0);
  EXPECT_EQ(permutation_assignments(2, 3), 400.0);  // C(6, 3)^2
  // 16 blocks enumerate 65,536 assignments exactly; 21 blocks are beyond 2^20 -> Monte Carlo floor.
  EXPECT_EQ(permutation_minimum_p(16, 1, 100000), 1.0 / 65536);
  EXPECT_EQ(permutation_minimum_p(21, 1, 100000), 1.0 / 100001);
  const Registration r = register_design(parse_design(test::small_design(21)));
  EXPECT_FALSE(r.permutation_exact);
  EXPECT_EQ(r.sign_test_minimum_p, std::ldexp(1.0, -21));
}

void expect_design_error(const std::function<void(json&)>& change, const std::string& fragment) {
  json j = test::small_design();
  change(j);
  try {
    parse_design(j);
    ADD_FAILURE() << "expected an error mentioning '" << fragment << "' for " << j.dump();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

TEST(LabDesign, BadDesignsNameTheField) {
  expect_design_error([](json& j) { j.erase("format"); }, "format: missing");
  expect_design_error([](json& j) { j["format"] = "frank-lab-design/0"; }, "format: must be");
  expect_design_error([](json& j) { j["arms"].erase(1); }, "arms: must list exactly two");
  expect_design_error([](json& j) { j["arms"][1]["name"] = "main"; }, "both arms are named");
  expect_design_error([](json& j) { j["arms"][0]["name"] = "has space"; }, "arms[0].name");
  expect_design_error([](json& j) { j["arms"][1]["url"] = "127.0.0.1:8101"; }, "arms[1].url");
  expect_design_error([](json& j) { j["arms"][0]["health"] = "health"; }, "arms[0].health");
  expect_design_error([](json& j) { j["arms"][0].erase("start"); }, "arms[0].start: missing");
  expect_design_error([](json& j) { j["arms"][0]["port"] = 1; }, "arms[0].port: unknown field");
  expect_design_error([](json& j) { j["baseline"] = "other"; }, "baseline: \"other\" is not one of the arms");
  expect_design_error([](json& j) { j["blocks"] = 0; }, "blocks: must be an integer in [1, 1000]");
  expect_design_error([](json& j) { j["blocks"] = 2.5; }, "blocks: must be an integer");
  expect_design_error([](json& j) { j.erase("draws_per_start"); }, "draws_per_start: missing");
  expect_design_error([](json& j) { j["starts_per_arm"] = 9; }, "starts_per_arm: must be an integer in [1, 8]");
  expect_design_error([](json& j) { j["workload"] = {{"turns", 3}}; }, "workload.name: missing");
  expect_design_error([](json& j) { j["workload"] = "agent"; }, "workload: must be a JSON object");
  expect_design_error([](json& j) { j["metric"]["better"] = "smaller"; }, "metric.better: must be \"lower\" or");
  expect_design_error([](json& j) { j["decision"] = {{"kind", "vibes"}}; }, "decision.kind: must be");
  expect_design_error(
      [](json& j) {
        j["decision"] = {{"kind", "all_blocks_better"}, {"alpha", 0.05}};
      },
      "decision.alpha: unknown field");
  expect_design_error(
      [](json& j) {
        j["decision"] = {{"kind", "sign_test"}, {"alpha", 0.05}};
      },
      "decision.alpha: 3 blocks cannot reach p <= 0.05 with the sign test (smallest p 0.125)");
  expect_design_error(
      [](json& j) {
        j["decision"] = {{"kind", "permutation"}, {"alpha", 0.1}};
      },
      "decision.alpha: 3 blocks cannot reach p <= 0.1 with the permutation test");
  expect_design_error(
      [](json& j) {
        j["decision"] = {{"kind", "permutation"}, {"alpha", 0}};
      },
      "decision.alpha: must be in (0, 1)");
  expect_design_error([](json& j) { j["decision"] = {{"kind", "bands"}}; }, "decision.expected_improvement: missing");
  expect_design_error(
      [](json& j) {
        j["decision"] = {{"kind", "bands"}, {"expected_improvement", -0.1}};
      },
      "decision.expected_improvement: must be > 0");
  expect_design_error(
      [](json& j) {
        j["decision"] = {{"kind", "bands"},
                         {"expected_improvement", 0.1},
                         {"adopt_if_lower_at_least", 0.3},
                         {"reject_if_upper_below", 0.6}};
      },
      "decision.reject_if_upper_below: must be in [0, adopt_if_lower_at_least");
  expect_design_error(
      [](json& j) {
        j["blocks"] = 1;
        j["decision"] = {{"kind", "bands"}, {"expected_improvement", 0.1}};
      },
      "bands need an interval, so at least 2 blocks");
  expect_design_error([](json& j) { j["blcoks"] = 3; }, "blcoks: unknown field");
  expect_design_error(
      [](json& j) {
        j["covariate"] = {{"name", "tps"}, {"reference", 2}, {"slope", {{"main", 1}}}, {"estimand", "end_to_end"}};
      },
      "covariate.slope.fast: missing");
  expect_design_error(
      [](json& j) {
        j["covariate"] = {{"name", "tps"}, {"reference", 2}, {"slope", 1}, {"estimand", "both"}};
      },
      "covariate.estimand: must be");
  expect_design_error(
      [](json& j) {
        j["covariate"] = {{"name", "time_s"}, {"reference", 2}, {"slope", 1}, {"estimand", "end_to_end"}};
      },
      "covariate.name: \"time_s\" is already the metric");
  expect_design_error(
      [](json& j) {
        j["quality_guards"] = {{{"metric", "passed"}, {"better", "higher"}, {"scale", "percent"}, {"margin", 0.1}}};
      },
      "quality_guards[0].scale: must be");
  expect_design_error(
      [](json& j) {
        j["quality_guards"] = {{{"metric", "passed"}, {"better", "higher"}, {"scale", "absolute"}, {"margin", -1}}};
      },
      "quality_guards[0].margin: must be >= 0");
  expect_design_error(
      [](json& j) {
        j["drift_guard"] = {{"reference_mean", 0}, {"max_relative_drift", 0.05}};
      },
      "drift_guard.reference_mean: must be > 0");
  expect_design_error(
      [](json& j) {
        j["drift_guard"] = {{"reference_mean", 40}};
      },
      "drift_guard.max_relative_drift: missing");
  expect_design_error(
      [](json& j) { j["sequence"] = json::parse(R"([["main", "fast"], ["main", "main"], ["fast", "main"]])"); },
      "sequence[1]: must start arm \"main\" exactly starts_per_arm = 1 times");
  expect_design_error([](json& j) { j["sequence"] = json::parse(R"([["main", "slow"]])"); },
                      "sequence[0]: unknown arm \"slow\"");
  expect_design_error([](json& j) { j["sequence"] = json::parse(R"([["main", "fast"]])"); },
                      "blocks: must equal the length of sequence (1)");
  expect_design_error([](json& j) { j["monte_carlo_samples"] = 10; }, "monte_carlo_samples: must be an integer in");
}

TEST(LabDesign, NotAnObjectAndBadFiles) {
  EXPECT_THROW(parse_design(json::array()), Error);
  test::TempDir dir;
  EXPECT_THROW(load_design(dir / "missing.json"), Error);
  test::write_text(dir / "broken.json", "{\"format\": ");
  try {
    load_design(dir / "broken.json");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("broken.json' is not valid JSON"));
  }
  test::write_text(dir / "bad.json", "{\"format\": \"frank-lab-design/1\"}");
  try {
    load_design(dir / "bad.json");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.json': name: missing"));
  }
}

}  // namespace
}  // namespace frank::lab
