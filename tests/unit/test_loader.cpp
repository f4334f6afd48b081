// Loading weights in every name spelling and dtype, and the errors for broken checkpoints.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "frank/core/error.h"
#include "frank/core/dtype.h"
#include "frank/model/loader.h"
#include "frank/model/names.h"
#include "model_test_util.h"

namespace frank::model {
namespace {

using ::testing::HasSubstr;

struct TinyCheckpoint {
  ModelConfig config = synthetic_config("tiny");
  ModelWeights weights = random_weights(config, 7);
};

void expect_weights_equal(const ModelConfig& c, ModelWeights& expected, ModelWeights& actual, bool bf16) {
  std::vector<const Tensor*> got;
  for_each_weight(c, actual, [&](const WeightSlot& s) { got.push_back(s.dst); });
  size_t i = 0;
  for_each_weight(c, expected, [&](const WeightSlot& s) {
    const Tensor& a = *got[i++];
    ASSERT_EQ(a.shape, s.shape) << s.name;
    for (size_t k = 0; k < a.data.size(); ++k) {
      const float want = bf16 ? bf16_to_f32(test::f32_to_bf16_rne(s.dst->data[k])) : s.dst->data[k];
      ASSERT_EQ(a.data[k], want) << s.name << "[" << k << "]";
    }
  });
  for (int l = 0; l < c.num_layers; ++l) EXPECT_EQ(expected.layers[l].moe.tid2eid, actual.layers[l].moe.tid2eid);
}

std::string identity(const std::string& s) { return s; }

TEST(Loader, OfficialNamesFp32RoundTrip) {
  TinyCheckpoint t;
  test::TempDir dir;
  test::write_checkpoint(dir.path(), test::tiny_official_config(), test::weight_specs(t.config, t.weights, false, identity));
  auto loaded = load_model(dir.path());
  EXPECT_TRUE(loaded.unused_tensors.empty());
  expect_weights_equal(t.config, t.weights, loaded.weights, false);
}

TEST(Loader, Bf16WeightsAreWidenedExactly) {
  TinyCheckpoint t;
  test::TempDir dir;
  test::write_checkpoint(dir.path(), test::tiny_official_config(), test::weight_specs(t.config, t.weights, true, identity));
  auto loaded = load_model(dir.path());
  expect_weights_equal(t.config, t.weights, loaded.weights, true);
}

// transformers' module names, with routed experts stacked per layer as transformers holds them.
TEST(Loader, TransformersModuleNamesWithStackedExperts) {
  TinyCheckpoint t;
  const auto& c = t.config;
  std::vector<test::TensorSpec> specs;
  const std::regex expert(R"(layers\.(\d+)\.ffn\.experts\.\d+\..*)");
  for (auto& s : test::weight_specs(c, t.weights, false, identity)) {
    if (std::regex_match(s.name, expert)) continue;
    // The last spelling candidate is the module name (or the saved name for top-level tensors).
    s.name = name_candidates(s.name).back();
    specs.push_back(s);
  }
  const int64_t E = c.n_routed_experts, I = c.moe_intermediate_size, D = c.hidden_size;
  for (int l = 0; l < c.num_layers; ++l) {
    std::vector<float> gate_up, down;
    for (auto& e : t.weights.layers[l].moe.experts) {
      gate_up.insert(gate_up.end(), e.gate.dense.data.begin(), e.gate.dense.data.end());
      gate_up.insert(gate_up.end(), e.up.dense.data.begin(), e.up.dense.data.end());
      down.insert(down.end(), e.down.dense.data.begin(), e.down.dense.data.end());
    }
    specs.push_back({stacked_gate_up_names(l)[0], "F32", {E, 2 * I, D}, test::to_bytes(gate_up)});
    specs.push_back({stacked_down_names(l)[0], "F32", {E, D, I}, test::to_bytes(down)});
  }
  test::TempDir dir;
  test::write_checkpoint(dir.path(), test::tiny_official_config(), specs);
  auto loaded = load_model(dir.path());
  EXPECT_TRUE(loaded.unused_tensors.empty()) << loaded.unused_tensors.front();
  expect_weights_equal(c, t.weights, loaded.weights, false);
}

TEST(Loader, NameCandidatesCoverAllSpellings) {
  EXPECT_THAT(name_candidates("layers.2.attn.kv_norm.weight"),
              ::testing::ElementsAre("layers.2.attn.kv_norm.weight", "model.layers.2.attn.kv_norm.weight",
                                     "model.layers.2.attn.norm.weight", "model.layers.2.self_attn.kv_norm.weight"));
  EXPECT_THAT(name_candidates("embed.weight"), ::testing::Contains("model.embed_tokens.weight"));
  EXPECT_THAT(name_candidates("hc_head_fn"), ::testing::Contains("model.hc_head.hc_fn"));
  EXPECT_THAT(name_candidates("layers.3.ffn.gate.bias"),
              ::testing::Contains("model.layers.3.mlp.gate.e_score_correction_bias"));
  EXPECT_THAT(name_candidates("layers.2.attn.indexer.compressor.ape"),
              ::testing::Contains("model.layers.2.self_attn.compressor.indexer.position_bias"));
  EXPECT_THAT(name_candidates("layers.0.ffn.shared_experts.w3.weight"),
              ::testing::Contains("model.layers.0.mlp.shared_experts.up_proj.weight"));
}

template <typename Edit>
std::string load_error(Edit edit) {
  TinyCheckpoint t;
  auto specs = test::weight_specs(t.config, t.weights, false, identity);
  auto config = test::tiny_official_config();
  edit(specs, config);
  test::TempDir dir;
  test::write_checkpoint(dir.path(), config, specs);
  try {
    load_model(dir.path());
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Loader, MissingTensorIsNamed) {
  const auto msg = load_error([](auto& specs, auto&) {
    std::erase_if(specs, [](const test::TensorSpec& s) { return s.name == "layers.4.attn.indexer.wq_b.weight"; });
  });
  EXPECT_THAT(msg, HasSubstr("lacks tensor 'layers.4.attn.indexer.wq_b.weight'"));
  EXPECT_THAT(msg, HasSubstr("model.layers.4.self_attn.compressor.indexer.q_b_proj.weight"));
}

TEST(Loader, WrongShapeIsNamed) {
  const auto msg = load_error([](auto& specs, auto&) {
    for (auto& s : specs)
      if (s.name == "layers.1.attn.wkv.weight") s.shape = {64, 32};
  });
  EXPECT_THAT(msg, HasSubstr("layers.1.attn.wkv.weight"));
  EXPECT_THAT(msg, HasSubstr("[32, 64]"));
}

TEST(Loader, HashTableOutsideExpertRange) {
  const auto msg = load_error([](auto& specs, auto&) {
    for (auto& s : specs)
      if (s.name == "layers.1.ffn.gate.tid2eid") {
        std::vector<int64_t> bad(256 * 2, 3);
        bad[11] = 8;
        s.data = test::to_bytes(bad);
      }
  });
  EXPECT_THAT(msg, HasSubstr("layers.1.ffn.gate.tid2eid"));
  EXPECT_THAT(msg, HasSubstr("expert 8, outside [0, 8)"));
}

// Quantized Linear weights: what the loader refuses, and that it names the tensor (the fixtures
// tiny-v4-fp8-fp4 and tiny-v4-fp8b32-fp4 check the numbers against transformers).
TEST(Loader, QuantizedWeightsWithoutFittingScalesAreRefused) {
  auto quantize = [](std::vector<test::TensorSpec>& specs, const std::string& name, const char* dtype,
                     std::vector<int64_t> values_shape, std::vector<test::TensorSpec> scales) {
    for (auto& s : specs)
      if (s.name == name) {
        s.dtype = dtype;
        s.shape = values_shape;
        s.data.assign(static_cast<size_t>(Tensor::count(values_shape)), '\x38');  // e4m3 1.0
      }
    specs.insert(specs.end(), scales.begin(), scales.end());
  };
  auto e8m0 = [](const std::string& name, std::vector<int64_t> shape, uint8_t byte) {
    return test::TensorSpec{name, "F8_E8M0", shape, std::string(static_cast<size_t>(Tensor::count(shape)), static_cast<char>(byte))};
  };
  // layers.0.attn.wq_a is [q_lora, hidden] = [32, 64] in the tiny config.
  EXPECT_THAT(load_error([&](auto& specs, auto&) { quantize(specs, "layers.0.attn.wq_a.weight", "F8_E4M3", {32, 64}, {}); }),
              HasSubstr("'layers.0.attn.wq_a.weight' is quantized but its scales ('layers.0.attn.wq_a.scale') are missing"));
  EXPECT_THAT(load_error([&](auto& specs, auto&) {
                quantize(specs, "layers.0.attn.wq_a.weight", "F8_E4M3", {32, 64}, {e8m0("layers.0.attn.wq_a.scale", {3, 3}, 127)});
              }),
              HasSubstr("has shape [3, 3]: not a 128x128 or 32x32 block grid of [32, 64]"));
  EXPECT_THAT(load_error([&](auto& specs, auto&) {
                quantize(specs, "layers.0.attn.wq_a.weight", "F8_E4M3", {32, 64},
                         {{"layers.0.attn.wq_a.scale", "F32", {1, 2}, test::to_bytes(std::vector<float>{1.0f, 3.0f})}});
              }),
              HasSubstr("element 1 is 3: not a power of two"));
  // A routed expert's w1 [32, 64] packed as FP4 must be [32, 32] bytes with [32, 2] scales.
  EXPECT_THAT(load_error([&](auto& specs, auto&) {
                quantize(specs, "layers.0.ffn.experts.0.w1.weight", "I8", {32, 64},
                         {e8m0("layers.0.ffn.experts.0.w1.scale", {32, 2}, 127)});
              }),
              HasSubstr("has shape [32, 64], expected [32, 32]"));
  EXPECT_THAT(load_error([&](auto& specs, auto&) {
                quantize(specs, "layers.0.ffn.experts.0.w1.weight", "I8", {32, 32},
                         {e8m0("layers.0.ffn.experts.0.w1.scale", {32, 2}, 127)});
              }),
              ::testing::Eq("no error"));
}

TEST(Loader, UnknownModelTypeIsRejected) {
  const auto msg = load_error([](auto&, auto& config) { config["model_type"] = "mixtral"; });
  EXPECT_THAT(msg, HasSubstr("unknown model_type 'mixtral'"));
}

TEST(Loader, ReportsUnusedTensorsButNotMtp) {
  TinyCheckpoint t;
  auto specs = test::weight_specs(t.config, t.weights, false, identity);
  // A second MTP layer (DeepSeek ships one; frank drafts with mtp.0) is not reported as unused.
  specs.push_back({"mtp.1.e_proj.weight", "F32", {1}, test::to_bytes(std::vector<float>{1})});
  specs.push_back({"layers.0.attn.mystery", "F32", {1}, test::to_bytes(std::vector<float>{1})});
  test::TempDir dir;
  test::write_checkpoint(dir.path(), test::tiny_official_config(), specs);
  EXPECT_THAT(load_model(dir.path()).unused_tensors, ::testing::ElementsAre("layers.0.attn.mystery"));
}

TEST(Loader, MalformedMtpBlockIsAnError) {
  const auto msg = load_error([](auto& specs, auto&) {
    specs.push_back({"mtp.0.e_proj.weight", "F32", {1}, test::to_bytes(std::vector<float>{1})});
  });
  EXPECT_THAT(msg, HasSubstr("tensor 'mtp.0.e_proj.weight'"));
  EXPECT_THAT(msg, HasSubstr("has shape [1], expected [64, 64]"));
}

}  // namespace
}  // namespace frank::model
