// Plan diff: exactly the experts that change home are listed, per layer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frank/core/error.h"
#include "frank/experts/plan_diff.h"

namespace frank::experts {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

ExpertPlan plan(std::vector<std::vector<uint16_t>> cpu) {
  const auto n_layers = static_cast<uint32_t>(cpu.size());
  return {"m/3x8/top2", n_layers, 8, std::move(cpu), ""};
}

TEST(PlanDiff, ListsMovesPerLayer) {
  const PlanDiff d = diff_plans(plan({{1, 2, 3}, {4, 5}, {0}}), plan({{2, 3, 6}, {4, 5}, {}}));
  ASSERT_EQ(d.layers.size(), 2u);  // layer 1 does not change
  EXPECT_EQ(d.layers[0].layer, 0u);
  EXPECT_THAT(d.layers[0].to_cpu, ElementsAre(6));
  EXPECT_THAT(d.layers[0].to_gpu, ElementsAre(1));
  EXPECT_EQ(d.layers[1].layer, 2u);
  EXPECT_THAT(d.layers[1].to_cpu, IsEmpty());
  EXPECT_THAT(d.layers[1].to_gpu, ElementsAre(0));
  EXPECT_EQ(d.to_cpu, 1u);
  EXPECT_EQ(d.to_gpu, 2u);
}

TEST(PlanDiff, IdenticalPlansMoveNothing) {
  const PlanDiff d = diff_plans(plan({{1}, {2}, {3}}), plan({{1}, {2}, {3}}));
  EXPECT_THAT(d.layers, IsEmpty());
  EXPECT_EQ(d.to_cpu + d.to_gpu, 0u);
}

TEST(PlanDiff, RefusesPlansOfDifferentModels) {
  ExpertPlan other = plan({{1}, {2}, {3}});
  other.model_fingerprint = "other";
  EXPECT_THROW(diff_plans(plan({{1}, {2}, {3}}), other), Error);
  EXPECT_THROW(diff_plans(plan({{1}, {2}, {3}}), plan({{1}, {2}})), Error);
}

}  // namespace
}  // namespace frank::experts
