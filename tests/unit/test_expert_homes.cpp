// Expert homes (experts/expert_homes.h): a plan file or a GPU memory budget turned into where each
// routed expert of the model lives, with the weights' GPU footprint computed by hand here, and
// every bad request refused with a message that names the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <unistd.h>

#include "frank/core/error.h"
#include "frank/experts/expert_homes.h"
#include "frank/experts/model_fingerprint.h"
#include "frank/model/synthetic.h"
#include "frank/model/synthetic_exl3.h"

namespace frank::experts {
namespace {

using ::testing::HasSubstr;

struct Tiny {
  model::ModelConfig config = model::synthetic_config("tiny");  // 6 layers x 8 experts, top-2
  model::ModelWeights weights = model::random_weights(config, 1);
};

std::string write_plan(const nlohmann::json& j) {
  static int count = 0;
  const auto path = std::filesystem::temp_directory_path() /
                    ("frank-homes-" + std::to_string(::getpid()) + "-" + std::to_string(++count) + ".json");
  std::ofstream(path) << j.dump();
  return path.string();
}

nlohmann::json plan_json(const std::string& fingerprint, nlohmann::json layers, int count) {
  return {{"format", "frank-expert-plan"}, {"version", 1},       {"model_fingerprint", fingerprint},
          {"n_layers", 6},                 {"n_experts", 8},    {"cpu_expert_count", count},
          {"layers", std::move(layers)}};
}

void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    FAIL() << "expected an error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

TEST(ExpertHomes, TheFootprintCountsARoutedExpertsThreeMatrices) {
  const Tiny t;
  const GpuWeightBytes bf16 = gpu_weight_bytes(t.config, t.weights, 2), fp32 = gpu_weight_bytes(t.config, t.weights, 4);
  EXPECT_EQ(bf16.routed_expert, 3.0 * 32 * 64 * 2);  // gate, up [32, 64], down [64, 32]
  EXPECT_EQ(fp32.routed_expert, 3.0 * 32 * 64 * 4);
  // Among the rest: the shared experts (6 of them) and the three hash layers' tables [256, 2] int32.
  EXPECT_GT(bf16.other, 6 * bf16.routed_expert + 3 * 256 * 2 * 4);
  EXPECT_LT(bf16.other, fp32.other);
}

// A benchmark's weights in other formats (FP8 / FP4 as shipped) say what each Linear takes.
TEST(ExpertHomes, TheFootprintTakesEachLinearsBytesWhenGiven) {
  const Tiny t;
  const GpuWeightBytes bf16 = gpu_weight_bytes(t.config, t.weights, 2);
  const GpuWeightBytes half = gpu_weight_bytes(t.config, t.weights, 2, [](const model::WeightSlot& s) {
    return 0.5 * static_cast<double>(Tensor::count(s.shape));  // FP4's nibbles, scales left out
  });
  EXPECT_EQ(half.routed_expert, bf16.routed_expert / 4);
  EXPECT_LT(half.other, bf16.other);
  EXPECT_GT(half.other, 0.0);  // norms, mHC and tables stay fp32
}

// Tiny's routed experts as EXL3 at 3 bits: each matrix ([32, 64] or [64, 32], padded to 128 x 128)
// holds a trellis I16 [8, 8, 48] and suh, svh F16 [128]: 6144 + 256 + 256 bytes.
Tiny with_exl3_experts(bool shape_only) {
  Tiny t;
  uint64_t seed = 0;
  for (auto& layer : t.weights.layers)
    for (auto& e : layer.moe.experts)
      for (LinearWeight* m : {&e.gate, &e.up, &e.down}) {
        QuantizedMatrix q = model::random_exl3(m->rows(), m->cols(), 3, Exl3Codebook::ThreeInst, model::exl3_seeds(++seed));
        if (shape_only) q.trellis.clear(), q.suh.clear(), q.svh.clear();
        m->quantized = std::move(q);
        m->dense = Tensor();
      }
  return t;
}
constexpr double kExl3Expert = 3 * (2.0 * 8 * 8 * 48 + 2.0 * 128 + 2.0 * 128);

TEST(ExpertHomes, TheFootprintCountsQuantizedExpertsAsStored) {
  const Tiny dense;
  const GpuWeightBytes bf16 = gpu_weight_bytes(dense.config, dense.weights, 2);
  for (const bool shape_only : {false, true}) {
    const Tiny t = with_exl3_experts(shape_only);
    const GpuWeightBytes b = gpu_weight_bytes(t.config, t.weights, 2);
    EXPECT_EQ(b.routed_expert, kExl3Expert) << "shape only: " << shape_only;
    EXPECT_EQ(b.other, bf16.other);  // the shared experts stay dense
    // A Linear-bytes rule for shape-only weights leaves the quantized experts as stored.
    const GpuWeightBytes ruled = gpu_weight_bytes(t.config, t.weights, 2, [](const model::WeightSlot&) { return 1.0; });
    EXPECT_EQ(ruled.routed_expert, kExl3Expert);
  }
}

TEST(ExpertHomes, APlanOverExl3ExpertsFitsTheBudgetByTheirBytes) {
  const Tiny t = with_exl3_experts(false);
  const GpuWeightBytes b = gpu_weight_bytes(t.config, t.weights, 2);
  ASSERT_EQ(b.routed_expert, kExl3Expert);
  // Room for 10 EXL3 experts (16 of them had they counted as bf16's 12288 bytes): 38 on the CPU.
  const double room_for_10 = (b.other + 10.5 * kExl3Expert) / 1e9;
  EXPECT_EQ(choose_expert_homes(t.config, b, {"", room_for_10}).cpu_count(), 38u);
  // A plan keeping 10 on the GPU (on the CPU: experts 1-7 of layers 0-1, 2-7 of layers 2-5) fits; 11 do not.
  nlohmann::json layers = nlohmann::json::array();
  for (int l = 0; l < 6; ++l) {
    nlohmann::json cpu = nlohmann::json::array();
    for (int e = l < 2 ? 1 : 2; e < 8; ++e) cpu.push_back(e);
    layers.push_back({{"layer", l}, {"cpu_experts", cpu}});
  }
  const auto fits = write_plan(plan_json(model_fingerprint(t.config), layers, 38));
  EXPECT_EQ(choose_expert_homes(t.config, b, {fits, room_for_10}).cpu_count(), 38u);
  layers[5]["cpu_experts"].erase(0);  // expert 2 of layer 5 back on the GPU: 11
  const auto one_more = write_plan(plan_json(model_fingerprint(t.config), layers, 37));
  expect_error([&] { choose_expert_homes(t.config, b, {one_more, room_for_10}); }, "has room for 10");
  for (const auto& p : {fits, one_more}) std::filesystem::remove(p);
}

TEST(ExpertHomes, NoPlanAndNoBudgetKeepEveryExpertOnTheGpu) {
  const Tiny t;
  const ExpertHomes h = choose_expert_homes(t.config, gpu_weight_bytes(t.config, t.weights, 2), {});
  EXPECT_EQ(h.cpu_count(), 0u);
}

TEST(ExpertHomes, ABudgetSendsTheExpertsThatDoNotFitToTheCpuInTheDefaultOrdering) {
  const Tiny t;
  const GpuWeightBytes b = gpu_weight_bytes(t.config, t.weights, 2);
  // Room for 10.5 routed experts: 10 stay on the GPU, 38 go to the CPU, 7 in layers 0-1, 6 in 2-5,
  // the highest ids of each layer.
  const ExpertHomes h = choose_expert_homes(t.config, b, {"", (b.other + 10.5 * b.routed_expert) / 1e9});
  EXPECT_EQ(h.cpu_count(), 38u);
  EXPECT_EQ(h.cpu_count(0), 7u);
  EXPECT_EQ(h.cpu_count(5), 6u);
  EXPECT_FALSE(h.on_cpu(5, 1));
  EXPECT_TRUE(h.on_cpu(5, 2));
  EXPECT_TRUE(h.on_cpu(0, 1));
  EXPECT_FALSE(h.on_cpu(0, 0));
  // A budget with room for everything keeps everything on the GPU.
  EXPECT_EQ(choose_expert_homes(t.config, b, {"", 1.0}).cpu_count(), 0u);
}

TEST(ExpertHomes, TheCacheSlotsComeOutOfTheBudget) {
  const Tiny t;
  const GpuWeightBytes b = gpu_weight_bytes(t.config, t.weights, 2);
  const double room_for_10 = (b.other + 10.5 * b.routed_expert) / 1e9;
  // Room for 10 experts, 4 of them cache slots: 6 stay GPU-homed, 42 go to the CPU.
  const ExpertHomes h = choose_expert_homes(t.config, b, {"", room_for_10, 4});
  EXPECT_EQ(h.cpu_count(), 42u);
  EXPECT_EQ(usable_cache_slots(h, 4), 4u);
  EXPECT_EQ(usable_cache_slots(h, 512), 42u);  // a slot per CPU-homed expert at most
  // Room for everything: no expert on the CPU, so the slots take nothing.
  EXPECT_EQ(choose_expert_homes(t.config, b, {"", 1.0, 512}).cpu_count(), 0u);
  expect_error([&] { choose_expert_homes(t.config, b, {"", room_for_10, 11}); }, "fewer than the 11 GPU cache slots");
  // A plan with 2 experts on the CPU keeps 46 on the GPU; its 2 usable slots make 48: room for 48, not 47.
  const auto plan = write_plan(plan_json(model_fingerprint(t.config), {{{"layer", 1}, {"cpu_experts", {0, 5}}}}, 2));
  EXPECT_EQ(choose_expert_homes(t.config, b, {plan, (b.other + 48.5 * b.routed_expert) / 1e9, 512}).cpu_count(), 2u);
  expect_error([&] { choose_expert_homes(t.config, b, {plan, (b.other + 47.5 * b.routed_expert) / 1e9, 512}); },
               "46 routed experts on the GPU and 2 cache slots");
  std::filesystem::remove(plan);
}

TEST(ExpertHomes, ABudgetBelowTheOtherWeightsIsRefused) {
  const Tiny t;
  const GpuWeightBytes b = gpu_weight_bytes(t.config, t.weights, 2);
  expect_error([&] { choose_expert_homes(t.config, b, {"", b.other / 2 / 1e9}); }, "is too small");
}

TEST(ExpertHomes, APlanIsReadAndValidatedAgainstTheModel) {
  const Tiny t;
  const GpuWeightBytes b = gpu_weight_bytes(t.config, t.weights, 2);
  const std::string fp = model_fingerprint(t.config);
  const auto good = write_plan(plan_json(fp, {{{"layer", 1}, {"cpu_experts", {0, 5}}}}, 2));
  const ExpertHomes h = choose_expert_homes(t.config, b, {good, std::nullopt});
  EXPECT_EQ(h.cpu_count(), 2u);
  EXPECT_TRUE(h.on_cpu(1, 5));
  EXPECT_FALSE(h.on_cpu(0, 5));

  const auto other_model = write_plan(plan_json("deepseek_v4/43x256/top6", nlohmann::json::array(), 0));
  expect_error([&] { choose_expert_homes(t.config, b, {other_model, std::nullopt}); }, "model_fingerprint");
  const auto unknown_expert = write_plan(plan_json(fp, {{{"layer", 1}, {"cpu_experts", {8}}}}, 1));
  expect_error([&] { choose_expert_homes(t.config, b, {unknown_expert, std::nullopt}); }, "unknown expert");
  const auto unknown_layer = write_plan(plan_json(fp, {{{"layer", 6}, {"cpu_experts", {1}}}}, 1));
  expect_error([&] { choose_expert_homes(t.config, b, {unknown_layer, std::nullopt}); }, "unknown layer");
  const auto twice = write_plan(plan_json(fp, {{{"layer", 1}, {"cpu_experts", {1, 1}}}}, 2));
  expect_error([&] { choose_expert_homes(t.config, b, {twice, std::nullopt}); }, "twice");
  expect_error([&] { choose_expert_homes(t.config, b, {"/nonexistent/plan.json", std::nullopt}); }, "cannot open");
  // The plan keeps 46 experts on the GPU; the budget has room for 10.
  expect_error([&] { choose_expert_homes(t.config, b, {good, (b.other + 10.5 * b.routed_expert) / 1e9}); },
               "has room for 10");
  for (const auto& p : {good, other_model, unknown_expert, unknown_layer, twice}) std::filesystem::remove(p);
}

}  // namespace
}  // namespace frank::experts
