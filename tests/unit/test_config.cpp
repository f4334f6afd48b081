// config.json parsing: both spellings give the same config; bad configs get clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frank/core/error.h"
#include "frank/model/config.h"
#include "frank/model/synthetic.h"
#include "model_test_util.h"

namespace frank::model {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

void expect_error(const json& j, const std::string& fragment) {
  try {
    parse_config(j);
    FAIL() << "expected an error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

// The same model in transformers' spelling (layer_types, mlp_layer_types, rope_parameters).
json tiny_transformers_config() {
  json j = test::tiny_official_config();
  for (auto key : {"compress_ratios", "num_hash_layers", "rope_scaling", "qk_rope_head_dim", "rope_theta",
                   "compress_rope_theta"})
    j.erase(key);
  j["layer_types"] = {"sliding_attention",           "sliding_attention",
                      "compressed_sparse_attention", "heavily_compressed_attention",
                      "compressed_sparse_attention", "heavily_compressed_attention"};
  j["compress_rates"] = {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 16}};
  j["mlp_layer_types"] = {"hash_moe", "hash_moe", "hash_moe", "moe", "moe", "moe"};
  j["partial_rotary_factor"] = 0.25;
  j["rope_parameters"] = {
      {"main", {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}}},
      {"compress",
       {{"rope_type", "yarn"}, {"rope_theta", 160000.0}, {"factor", 16.0}, {"original_max_position_embeddings", 65536},
        {"beta_fast", 32}, {"beta_slow", 1}, {"attention_factor", 1.0}, {"partial_rotary_factor", 0.25}}}};
  return j;
}

void expect_same_schedule(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.attention, b.attention);
  EXPECT_EQ(a.compress_ratio, b.compress_ratio);
  EXPECT_EQ(a.hash_routed, b.hash_routed);
  EXPECT_EQ(a.rope_dim, b.rope_dim);
  EXPECT_EQ(a.rope_main.theta, b.rope_main.theta);
  EXPECT_EQ(a.rope_main.yarn, b.rope_main.yarn);
  EXPECT_EQ(a.rope_compress.theta, b.rope_compress.theta);
  EXPECT_EQ(a.rope_compress.yarn, b.rope_compress.yarn);
  EXPECT_EQ(a.rope_compress.factor, b.rope_compress.factor);
  EXPECT_EQ(a.rope_compress.original_max_position_embeddings, b.rope_compress.original_max_position_embeddings);
}

TEST(Config, OfficialAndTransformersSpellingsAgree) {
  const auto official = parse_config(test::tiny_official_config());
  const auto hf = parse_config(tiny_transformers_config());
  expect_same_schedule(official, hf);
  expect_same_schedule(official, synthetic_config("tiny"));
  EXPECT_EQ(official.attention[2], AttentionKind::CompressedSparse);
  EXPECT_EQ(official.compress_ratio[3], 16);
  EXPECT_EQ(official.num_hash_layers(), 3);
  EXPECT_TRUE(official.rope_compress.yarn);
  EXPECT_FALSE(official.rope_main.yarn);
}

TEST(Config, DefaultsAreTransformersDefaults) {
  // transformers: no schedule given -> 2 HCA layers then CSA/HCA interleaved, 3 hash layers.
  const auto c = parse_config(json{{"model_type", "deepseek_v4"}, {"num_hidden_layers", 5}});
  using K = AttentionKind;
  EXPECT_EQ(c.attention, (std::vector<K>{K::HeavilyCompressed, K::HeavilyCompressed, K::HeavilyCompressed,
                                         K::CompressedSparse, K::HeavilyCompressed}));
  EXPECT_EQ(c.hash_routed, (std::vector<bool>{true, true, true, false, false}));
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.rope_dim, 64);
}

TEST(Config, RejectsUnknownModelType) {
  expect_error(json{{"model_type", "llama"}}, "unknown model_type 'llama'");
  expect_error(json{{"model_type", "deepseek_v41"}}, "is not a DeepSeek-V4 model");
  expect_error(json::array(), "JSON object");
}

TEST(Config, RejectsInconsistentFields) {
  auto j = test::tiny_official_config();
  j["compress_ratios"] = {0, 4};
  expect_error(j, "compress_ratios must list at least");
  j = test::tiny_official_config();
  j["hidden_size"] = -3;
  expect_error(j, "'hidden_size' must be positive");
  j = test::tiny_official_config();
  j["num_attention_heads"] = "four";
  expect_error(j, "'num_attention_heads' has the wrong type");
  j = test::tiny_official_config();
  j["num_key_value_heads"] = 2;
  expect_error(j, "num_key_value_heads must be 1");
  j = test::tiny_official_config();
  j["scoring_func"] = "softmax";
  expect_error(j, "scoring_func 'softmax'");
  j = tiny_transformers_config();
  j["layer_types"][1] = "full_attention";
  expect_error(j, "unknown layer type 'full_attention'");
  j = tiny_transformers_config();
  j["rope_parameters"]["compress"]["attention_factor"] = 1.277;
  expect_error(j, "attention_factor");
  j = test::tiny_official_config();
  j["qk_rope_head_dim"] = 7;
  expect_error(j, "must be even");
}

}  // namespace
}  // namespace frank::model
