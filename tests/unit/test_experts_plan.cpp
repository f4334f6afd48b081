// Expert plans: the JSON schema round-trips; every kind of bad plan is refused with the field
// named; the default ordering and the frequency ranking place exactly the experts documented.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "frank/core/error.h"
#include "frank/experts/baseline_plans.h"
#include "frank/experts/expert_plan.h"
#include "frank/experts/model_fingerprint.h"
#include "safetensors_test_util.h"

namespace frank::experts {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char* kFingerprint = "deepseek_v4/3x8/top2";

json valid_plan() {
  return {{"format", "frank-expert-plan"},
          {"version", 1},
          {"model_fingerprint", kFingerprint},
          {"n_layers", 3},
          {"n_experts", 8},
          {"cpu_expert_count", 4},
          {"layers", {{{"layer", 0}, {"cpu_experts", {7, 2}}}, {{"layer", 2}, {"cpu_experts", {0, 1}}}}}};
}

void expect_refused(const json& j, const std::string& fragment, const std::string& expected_fingerprint = "") {
  try {
    parse_plan(j, expected_fingerprint, "p.json");
    FAIL() << "expected an error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("expert plan 'p.json'"));
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

TEST(ExpertPlan, ParsesAValidPlan) {
  const ExpertPlan plan = parse_plan(valid_plan(), kFingerprint, "p.json");
  EXPECT_EQ(plan.model_fingerprint, kFingerprint);
  EXPECT_EQ(plan.n_layers, 3u);
  EXPECT_EQ(plan.n_experts, 8u);
  EXPECT_EQ(plan.cpu_expert_count(), 4u);
  EXPECT_THAT(plan.cpu_experts[0], ElementsAre(2, 7));  // sorted
  EXPECT_TRUE(plan.cpu_experts[1].empty());             // an omitted layer keeps every expert on the GPU
  EXPECT_THAT(plan.cpu_experts[2], ElementsAre(0, 1));
  const std::vector<bool> mask = plan.cpu_mask();
  EXPECT_EQ(std::count(mask.begin(), mask.end(), true), 4);
  EXPECT_TRUE(mask[0 * 8 + 7] && mask[2 * 8 + 0]);
}

TEST(ExpertPlan, AnEmptyExpectedFingerprintAcceptsAnyModel) { EXPECT_NO_THROW(parse_plan(valid_plan(), "", "p.json")); }

TEST(ExpertPlan, FormatThenParseRoundTrips) {
  ExpertPlan plan = parse_plan(valid_plan(), "", "p.json");
  plan.description = "made by a test";
  const ExpertPlan back = parse_plan(json::parse(format_plan(plan)), kFingerprint, "back.json");
  EXPECT_EQ(back.cpu_experts, plan.cpu_experts);
  EXPECT_EQ(back.description, "made by a test");
  EXPECT_EQ(back.n_layers, plan.n_layers);
}

TEST(ExpertPlan, SaveThenLoad) {
  test::TempDir dir;
  const ExpertPlan plan = parse_plan(valid_plan(), "", "p.json");
  save_plan((dir / "plan.json").string(), plan);
  EXPECT_EQ(load_plan((dir / "plan.json").string(), kFingerprint).cpu_experts, plan.cpu_experts);
}

TEST(ExpertPlan, RefusesAWrongFingerprint) {
  expect_refused(valid_plan(),
                 "model_fingerprint: the plan is for 'deepseek_v4/3x8/top2' but the model is "
                 "'deepseek_v4/43x256/top6'",
                 "deepseek_v4/43x256/top6");
}

TEST(ExpertPlan, RefusesAnUnknownLayer) {
  json j = valid_plan();
  j["layers"][1]["layer"] = 3;
  expect_refused(j, "layers[1].layer: unknown layer 3 (the model has 3 layers)");
  j["layers"][1]["layer"] = -1;
  expect_refused(j, "layers[1].layer: unknown layer -1");
}

TEST(ExpertPlan, RefusesAnUnknownExpert) {
  json j = valid_plan();
  j["layers"][0]["cpu_experts"][1] = 8;
  expect_refused(j, "layers[0].cpu_experts[1]: unknown expert 8 (layers have 8 experts)");
}

TEST(ExpertPlan, RefusesADuplicateExpert) {
  json j = valid_plan();
  j["layers"][0]["cpu_experts"] = {7, 2, 7};
  j["cpu_expert_count"] = 5;
  expect_refused(j, "layers[0].cpu_experts[2]: expert 7 is listed twice in layer 0");
}

TEST(ExpertPlan, RefusesADuplicateLayer) {
  json j = valid_plan();
  j["layers"][1]["layer"] = 0;
  expect_refused(j, "layers[1].layer: layer 0 is listed twice (also in layers[0])");
}

TEST(ExpertPlan, RefusesACountMismatch) {
  json j = valid_plan();
  j["cpu_expert_count"] = 5;
  expect_refused(j, "cpu_expert_count: says 5 but the layers list 4 CPU experts");
}

TEST(ExpertPlan, RefusesAnUnsupportedVersion) {
  json j = valid_plan();
  j["version"] = 2;
  expect_refused(j, "version: unsupported plan version 2");
  j.erase("version");
  expect_refused(j, "version: missing");
}

TEST(ExpertPlan, RefusesMissingOrMistypedFields) {
  for (const char* key : {"format", "model_fingerprint", "n_layers", "n_experts", "cpu_expert_count", "layers"}) {
    json j = valid_plan();
    j.erase(key);
    expect_refused(j, fmt::format("{}: missing", key));
  }
  json j = valid_plan();
  j["format"] = "something-else";
  expect_refused(j, "format: must be \"frank-expert-plan\"");
  j = valid_plan();
  j["n_layers"] = "3";
  expect_refused(j, "n_layers: must be an integer");
  j = valid_plan();
  j["n_experts"] = 0;
  expect_refused(j, "n_experts: 0 is not in 1..65536");
  j = valid_plan();
  j["layers"][0]["cpu_experts"][0] = 1.5;
  expect_refused(j, "layers[0].cpu_experts[0]: must be an integer");
  j = valid_plan();
  j["layers"][0].erase("cpu_experts");
  expect_refused(j, "layers[0].cpu_experts: missing");
  expect_refused(json::array(), "a plan must be a JSON object");
}

TEST(ExpertPlan, RefusesUnknownKeys) {
  json j = valid_plan();
  j["cpu_expert_cnt"] = 4;
  expect_refused(j, "cpu_expert_cnt: unknown key");
  j = valid_plan();
  j["layers"][0]["gpu_experts"] = json::array();
  expect_refused(j, "layers[0].gpu_experts: unknown key");
}

TEST(ExpertPlan, LoadNamesTheFileOnBadJson) {
  test::TempDir dir;
  std::ofstream(dir / "bad.json") << "{ not json";
  try {
    load_plan((dir / "bad.json").string(), "");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.json' is not valid JSON"));
  }
  EXPECT_THROW(load_plan((dir / "missing.json").string(), ""), Error);
}

TEST(DefaultPlan, HighestIdsOfEveryLayerWithTheRemainderOnTheFirstLayers) {
  const ExpertPlan plan = default_plan(kFingerprint, 3, 8, 7);  // 7 = 2 per layer + 1 extra for layer 0
  EXPECT_EQ(plan.cpu_expert_count(), 7u);
  EXPECT_THAT(plan.cpu_experts[0], ElementsAre(5, 6, 7));
  EXPECT_THAT(plan.cpu_experts[1], ElementsAre(6, 7));
  EXPECT_THAT(plan.cpu_experts[2], ElementsAre(6, 7));
  EXPECT_EQ(plan.model_fingerprint, kFingerprint);
  EXPECT_EQ(default_plan(kFingerprint, 3, 8, 0).cpu_expert_count(), 0u);
  EXPECT_EQ(default_plan(kFingerprint, 3, 8, 24).cpu_expert_count(), 24u);
  EXPECT_THROW(default_plan(kFingerprint, 3, 8, 25), Error);
}

TEST(DefaultPlan, V4FlashFingerprint) {
  EXPECT_EQ(model_fingerprint("deepseek_v4", kV4FlashLayers, kV4FlashExperts, kV4FlashTopK), "deepseek_v4/43x256/top6");
}

TEST(FrequencyPlan, LeastRoutedExpertsGoToTheCpuTiesByDefaultOrdering) {
  // 2 layers x 4 experts, top-1: a 3-token prefill step, then three decode steps.
  RoutingTrace t{"t", {kFingerprint, 2, 4, 1, 0}, {}};
  t.steps.push_back({StepKind::Prefill, {{0, 0, 0}, {0, 3, 3}}});
  t.steps.push_back({StepKind::Decode, {{1}, {3}}});
  t.steps.push_back({StepKind::Decode, {{2}, {2}}});
  t.steps.push_back({StepKind::Decode, {{2}, {1}}});
  // Routings: layer 0: e0 3, e1 1, e2 2, e3 0; layer 1: e0 1, e1 1, e2 1, e3 3. Ascending: (0,e3)
  // with 0, then the ties at 1 by higher id, then lower layer: (1,e2), (0,e1), (1,e1), (1,e0).
  const ExpertPlan plan = frequency_plan({t}, 4);
  EXPECT_THAT(plan.cpu_experts[0], ElementsAre(1, 3));
  EXPECT_THAT(plan.cpu_experts[1], ElementsAre(1, 2));
  EXPECT_EQ(frequency_plan({t}, 0).cpu_expert_count(), 0u);
  EXPECT_THROW(frequency_plan({t}, 9), Error);
}

}  // namespace
}  // namespace frank::experts
