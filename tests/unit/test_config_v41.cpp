// DeepSeek-V4.1 config.json: the two golden fixtures' configs, the release defaults, a vision config,
// and malformed variants with the error each must give.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "frank/core/error.h"
#include "frank/model/config_v41.h"

namespace frank::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;

const std::filesystem::path kFixtures = std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv41";

json fixture_config(const char* name) { return read_config_json(kFixtures / name); }

void expect_error(const json& j, const std::string& fragment) {
  try {
    parse_v41_config(j);
    FAIL() << "expected an error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

// The fixture's config with one text_config field replaced (or removed when `value` is null).
json with_text(const char* key, const json& value) {
  json j = fixture_config("tiny-v41");
  if (value.is_null())
    j["text_config"].erase(key);
  else
    j["text_config"][key] = value;
  return j;
}

TEST(ConfigV41, TinyFixture) {
  const auto c = load_v41_config(kFixtures / "tiny-v41");
  EXPECT_EQ(c.model_type, "deepseek_v41");
  EXPECT_EQ(c.vocab_size, 31);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.num_layers, 8);
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_dim, 16);
  EXPECT_EQ(c.q_lora_rank, 16);
  EXPECT_EQ(c.o_groups, 2);
  EXPECT_EQ(c.o_lora_rank, 8);
  EXPECT_EQ(c.n_routed_experts, 4);
  EXPECT_EQ(c.experts_per_token, 2);
  EXPECT_EQ(c.moe_intermediate_size, 16);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.index_n_heads, 16);
  EXPECT_EQ(c.index_head_dim, 32);
  EXPECT_EQ(c.index_topk, 3);
  EXPECT_EQ(c.rms_norm_eps, 1e-20f);
  EXPECT_EQ(c.gate_temp, 1.0f);
  EXPECT_EQ(c.num_nextn_predict_layers, 0);
  EXPECT_FALSE(c.rope_main.yarn);
  EXPECT_EQ(c.rope_main.theta, 10000.0);
  EXPECT_TRUE(c.rope_compress.yarn);
  EXPECT_EQ(c.rope_compress.theta, 160000.0);
  EXPECT_EQ(c.rope_compress.factor, 16.0);
  EXPECT_EQ(c.rope_compress.original_max_position_embeddings, 65536);

  EXPECT_THAT(c.compress_ratio, ElementsAre(0, 0, 2, 2, 1, 1, 1, 1));
  EXPECT_THAT(c.kv_source_layers, ElementsAre(2, 4));
  EXPECT_THAT(c.index_source_layers, ElementsAre(2, 4, 6));
  EXPECT_EQ(c.candidate_source_layer, 4);
  EXPECT_EQ(c.candidate_topk_blocks, 2);
  EXPECT_EQ(c.candidate_block_size, 4);
  // Layer roles (README "What each fixture makes live"): 3 reads 2's entries, 5-7 read 4's.
  EXPECT_EQ(c.kv_source_of(1), -1);
  EXPECT_EQ(c.kv_source_of(3), 2);
  EXPECT_EQ(c.kv_source_of(4), 4);
  EXPECT_EQ(c.kv_source_of(7), 4);
  EXPECT_TRUE(c.is_index_source(6));
  EXPECT_FALSE(c.is_kv_source(6));

  EXPECT_THAT(c.engram.layer_ids, ElementsAre(1, 4));
  EXPECT_THAT(c.engram.table_rows, ElementsAre(211, 251));
  EXPECT_EQ(c.engram.hash_vocab_size, 64);
  EXPECT_EQ(c.engram.max_ngram_size, 4);
  EXPECT_EQ(c.engram.n_heads, 1);
  EXPECT_EQ(c.engram.head_dim, 32);
  EXPECT_EQ(c.engram.pad_token_id, 30);
  EXPECT_EQ(c.engram.compressed_vocab_size, 20);
  EXPECT_EQ(c.engram.hash_columns(), 3);
  EXPECT_EQ(c.engram.index_of(4), 1);
  EXPECT_EQ(c.engram.index_of(2), -1);
  EXPECT_FALSE(c.has_vision_config);
  EXPECT_TRUE(c.notes.empty());
}

TEST(ConfigV41, NativeFixture) {
  const auto c = load_v41_config(kFixtures / "tiny-v41-native");
  EXPECT_EQ(c.hidden_size, 24);
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.rope_dim, 32);
  EXPECT_EQ(c.sliding_window, 16);
  EXPECT_EQ(c.experts_per_token, 3);
  EXPECT_EQ(c.index_topk, 5);
  EXPECT_THAT(c.compress_ratio, ElementsAre(0, 1, 2, 2, 1, 1));
  EXPECT_THAT(c.kv_source_layers, ElementsAre(1, 2, 4));
  EXPECT_THAT(c.index_source_layers, ElementsAre(1, 2, 4, 5));
  EXPECT_EQ(c.kv_source_of(3), 2);
  EXPECT_EQ(c.kv_source_of(5), 4);
  EXPECT_THAT(c.engram.layer_ids, ElementsAre(0, 2));
  EXPECT_THAT(c.engram.table_rows, ElementsAre(204, 216));
  EXPECT_EQ(c.engram.max_ngram_size, 3);
  EXPECT_EQ(c.engram.hash_vocab_size, 100);
}

TEST(ConfigV41, ReleaseDefaults) {
  // An empty text_config means transformers' defaults: the released V4.1-Flash schedule (§1-§2).
  json j = {{"model_type", "deepseek_v41"}, {"text_config", json::object()}};
  auto c = parse_v41_config(j);
  EXPECT_EQ(c.num_layers, 40);
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.rope_dim, 64);
  EXPECT_EQ(c.compress_ratio.size(), 40u);
  EXPECT_EQ(c.compress_ratio[1], 0);
  EXPECT_EQ(c.compress_ratio[19], 2);
  EXPECT_EQ(c.compress_ratio[20], 1);
  EXPECT_THAT(c.kv_source_layers, ElementsAre(2, 8, 14, 20));
  EXPECT_THAT(c.index_source_layers, ElementsAre(2, 8, 14, 20, 24, 28, 32, 36));
  EXPECT_EQ(c.candidate_source_layer, 20);
  EXPECT_EQ(c.kv_source_of(13), 8);
  EXPECT_EQ(c.kv_source_of(39), 20);
  EXPECT_EQ(c.engram.pad_token_id, 2);
  EXPECT_TRUE(c.notes.empty());
  // Three DSpark stages with the release's settings (dsv41-model.md §8).
  ASSERT_TRUE(c.dspark.has_value());
  EXPECT_EQ(c.dspark->n_stages, 3);
  EXPECT_EQ(c.dspark->block_size, 5);
  EXPECT_EQ(c.dspark->noise_token_id, 128799);
  EXPECT_EQ(c.dspark->markov_rank, 256);
  EXPECT_THAT(c.dspark->target_layers, ElementsAre(37, 38, 39));
  EXPECT_EQ(c.dspark_stage().n_routed_experts, 128);
  EXPECT_EQ(c.dspark_stage().experts_per_token, 3);

  // The release lists 40 + 3 DSpark ratios and spells the schedule out.
  std::vector<int> ratios{0, 0};
  ratios.insert(ratios.end(), 18, 2);
  ratios.insert(ratios.end(), 20, 1);
  ratios.insert(ratios.end(), 3, 0);
  j["text_config"] = {{"compress_ratios", ratios},
                      {"engram_layer_ids", {1, 14}},
                      {"engram_num_embeddings", {384006168, 384016682}},
                      {"engram_pad_token_id", 2}};
  c = parse_v41_config(j);
  EXPECT_EQ(c.compress_ratio.size(), 40u);
  EXPECT_THAT(c.engram.table_rows, ElementsAre(384006168, 384016682));
  EXPECT_EQ(c.engram.hash_columns(), 24);
}

TEST(ConfigV41, VisionConfigIsNotedAndTheTextModelLoads) {
  json j = fixture_config("tiny-v41");
  j["vision_config"] = {{"hidden_size", 1024}, {"num_hidden_layers", 32}};
  j["image_token_id"] = 29;
  const auto c = parse_v41_config(j);
  EXPECT_TRUE(c.has_vision_config);
  EXPECT_EQ(c.image_token_id, 29);
  EXPECT_THAT(c.notes, ElementsAre(HasSubstr("images are not supported")));
  EXPECT_EQ(c.num_layers, 8);
}

TEST(ConfigV41, FlatTextConfig) {
  json flat = fixture_config("tiny-v41")["text_config"];
  const auto c = parse_v41_config(flat);  // model_type deepseek_v41_text
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_THAT(c.kv_source_layers, ElementsAre(2, 4));
  json hf_pad = flat;
  hf_pad.erase("engram_pad_token_id");
  hf_pad["engram_pad_id"] = 29;  // transformers' spelling
  EXPECT_EQ(parse_v41_config(hf_pad).engram.pad_token_id, 29);
}

TEST(ConfigV41, DSparkFixture) {
  const auto c = parse_v41_config(read_config_json(kFixtures.parent_path() / "dsv41-dspark" / "tiny-v41-dspark"));
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.compress_ratio.size(), 6u);  // the 3 trailing DSpark ratios are dropped
  ASSERT_TRUE(c.dspark.has_value());
  const DSparkConfig& d = *c.dspark;
  EXPECT_EQ(d.n_stages, 3);
  EXPECT_EQ(d.block_size, 5);
  EXPECT_EQ(d.noise_token_id, 0);
  EXPECT_EQ(d.markov_rank, 8);
  EXPECT_THAT(d.target_layers, ElementsAre(3, 4, 5));
  const V41Config stage = c.dspark_stage();
  EXPECT_EQ(stage.n_routed_experts, 4);
  EXPECT_EQ(stage.experts_per_token, 2);
  EXPECT_EQ(c.experts_per_token, 3);  // the main model keeps its own
  EXPECT_FALSE(parse_v41_config(fixture_config("tiny-v41")).dspark.has_value());
}

TEST(ConfigV41, MalformedDSparkKeysAreNamed) {
  auto with_dspark = [](const char* key, const json& value) {
    json j = read_config_json(kFixtures.parent_path() / "dsv41-dspark" / "tiny-v41-dspark");
    j["text_config"][key] = value;
    return j;
  };
  expect_error(with_dspark("dspark_target_layer_ids", {4, 6}), "dspark_target_layer_ids [4, 6]");
  expect_error(with_dspark("dspark_target_layer_ids", json::array()), "must not be empty");
  expect_error(with_dspark("dspark_noise_token_id", 31), "dspark_noise_token_id 31 is outside the vocabulary");
  expect_error(with_dspark("dspark_block_size", 0), "'dspark_block_size' must be positive");
  expect_error(with_dspark("dspark_num_experts_per_tok", 200), "exceeds dspark_n_routed_experts");
}

TEST(ConfigV41, MalformedConfigsAreNamed) {
  expect_error(json::array(), "top level");
  expect_error(json{{"model_type", "deepseek_v4"}}, "not DeepSeek-V4.1");
  expect_error(json{{"model_type", "deepseek_v41"}, {"text_config", 5}}, "text_config must be a JSON object");
  json wrong_sub = fixture_config("tiny-v41");
  wrong_sub["text_config"]["model_type"] = "llama";
  expect_error(wrong_sub, "text_config.model_type");
  expect_error(with_text("hidden_size", "big"), "'hidden_size' has the wrong type");
  expect_error(with_text("hidden_size", 0), "'hidden_size' must be positive");
  expect_error(with_text("num_key_value_heads", 2), "num_key_value_heads must be 1");
  expect_error(with_text("compress_ratios", {0, 0, 2}), "compress_ratios has 3 entries");
  expect_error(with_text("compress_ratios", {0, 0, 2, 2, 4, 1, 1, 1}), "compress_ratios[4] = 4");
  expect_error(with_text("compress_ratios", "0,0,2"), "must be a list of integers");
  expect_error(with_text("kv_source_layer_ids", {1, 4}), "kv_source_layer_ids [1, 4]");
  expect_error(with_text("kv_source_layer_ids", {4}), "layer 2 has compress_ratios 2 but no kv_source_layer_ids");
  expect_error(with_text("index_source_layer_ids", {0, 4}), "index_source_layer_ids [0, 4]");
  expect_error(with_text("candidate_source_layer_id", 5), "candidate_source_layer_id (5)");
  expect_error(with_text("engram_num_embeddings", {211}), "engram_num_embeddings has 1 entries");
  expect_error(with_text("engram_num_embeddings", nullptr), "engram_num_embeddings (the rows of each Engram table) is missing");
  expect_error(with_text("engram_num_embeddings", {211, 0}), "must be positive");
  expect_error(with_text("engram_layer_ids", {1, 8}), "engram_layer_ids [1, 8]");
  expect_error(with_text("engram_layer_ids", {1, 1}), "lists layer 1 twice");
  expect_error(with_text("engram_max_ngram_size", 1), "at least 2");
  expect_error(with_text("engram_pad_token_id", 31), "outside the vocabulary");
  expect_error(with_text("engram_pad_id", 3), "disagree");
  expect_error(with_text("hidden_act", "gelu"), "hidden_act 'gelu'");
  expect_error(with_text("tie_word_embeddings", true), "tie_word_embeddings");
  expect_error(with_text("gate_temp", -1.0), "gate_temp must be positive");
  json rope = with_text("rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}});
  expect_error(rope, "rope type 'linear' is not supported (DeepSeek-V4.1 uses yarn)");
}

}  // namespace
}  // namespace frank::model
