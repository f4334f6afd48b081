// Loading the DeepSeek-V4.1 golden fixtures in both name spellings, the Engram hash data, and the
// errors for broken checkpoints (edited copies of the fixtures).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "frank/core/error.h"
#include "frank/model/checkpoint.h"
#include "frank/model/loader_v41.h"
#include "frank/model/safetensors.h"
#include "safetensors_test_util.h"

namespace frank::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::filesystem::path kFixtures = std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv41";

LoadedV41Model load_fixture(const char* name) {
  return load_v41_model(kFixtures / name, kFixtures / name / "reference.safetensors");
}

// The tensors of a fixture file, to write edited copies.
std::vector<test::TensorSpec> specs_of(const std::filesystem::path& file) {
  const auto st = SafetensorsFile::open(file);
  std::vector<test::TensorSpec> out;
  for (const auto& [name, info] : st.tensors()) {
    const auto bytes = st.bytes(info);
    out.push_back({name, info.dtype_name, info.shape,
                   std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())});
  }
  return out;
}

// A copy of fixture `name` whose model.safetensors (or, with `file`, another file) went through `edit`.
void write_edited_copy(const test::TempDir& dir, const char* name,
                       const std::function<void(std::vector<test::TensorSpec>&)>& edit,
                       const char* file = "model.safetensors") {
  for (const char* f : {"config.json", "model.safetensors", "reference.safetensors"})
    std::filesystem::copy_file(kFixtures / name / f, dir / f);
  auto specs = specs_of(kFixtures / name / file);
  edit(specs);
  test::write_file(dir / file, test::build_safetensors(specs));
}

std::string load_error(const test::TempDir& dir) {
  try {
    load_v41_model(dir.path(), dir / "reference.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Values of `name` in a fixture file, as the file stores them (F32).
std::vector<float> stored(const char* fixture, const std::string& name, const char* file = "model.safetensors") {
  const auto ck = Checkpoint::open_file(kFixtures / fixture / file);
  return ck.read_f32(name, ck.find(name)->shape);
}

void check_layout(const V41Config& c, const V41Weights& w) {
  ASSERT_EQ(w.layers.size(), static_cast<size_t>(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    const auto& L = w.layers[l];
    EXPECT_EQ(L.attn.compressor.has_value(), c.is_kv_source(l)) << l;
    if (L.attn.compressor) {
      EXPECT_EQ(L.attn.compressor->gate_proj.has_value(), c.compress_ratio[l] == 2) << l;
    }
    EXPECT_EQ(L.attn.indexer.has_value(), c.is_index_source(l)) << l;
    if (L.attn.indexer) {
      EXPECT_EQ(L.attn.indexer->k_proj.has_value(), c.is_kv_source(l)) << l;
    }
    EXPECT_EQ(L.engram.has_value(), c.engram.index_of(l) >= 0) << l;
    EXPECT_EQ(L.moe.experts.size(), static_cast<size_t>(c.n_routed_experts));
    EXPECT_EQ(L.image_selection_bias.shape, (std::vector<int64_t>{c.n_routed_experts}));
  }
}

TEST(LoaderV41, TransformersNamesFixture) {
  const auto m = load_fixture("tiny-v41");
  check_layout(m.config, m.weights);
  EXPECT_TRUE(m.unused_tensors.empty()) << m.unused_tensors.front();
  EXPECT_TRUE(m.notes.empty());
  // Spot checks against the file: a stacked expert's up rows, the model-level Engram table, the
  // indexer key projection and the image bias.
  const auto gate_up = stored("tiny-v41", "model.layers.3.mlp.experts.gate_up_proj");  // [4, 32, 32]
  const auto& up = m.weights.layers[3].moe.experts[1].up.dense;
  ASSERT_EQ(up.shape, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(up.data, std::vector<float>(gate_up.begin() + 32 * 32 + 16 * 32, gate_up.begin() + 2 * 32 * 32));
  EXPECT_EQ(m.weights.layers[4].engram->table.data, stored("tiny-v41", "model.engram_tables.4.weight"));
  EXPECT_EQ(m.weights.layers[4].engram->table.shape, (std::vector<int64_t>{251, 32}));
  EXPECT_EQ(m.weights.layers[2].attn.indexer->k_proj->dense.data,
            stored("tiny-v41", "model.layers.2.self_attn.indexer.k_proj.weight"));
  EXPECT_EQ(m.weights.layers[5].image_selection_bias.data,
            stored("tiny-v41", "model.layers.5.mlp.gate.e_score_correction_bias_vl"));
}

TEST(LoaderV41, ReleasedNamesFixture) {
  const auto m = load_fixture("tiny-v41-native");
  check_layout(m.config, m.weights);
  EXPECT_TRUE(m.unused_tensors.empty()) << m.unused_tensors.front();
  EXPECT_EQ(m.weights.layers[2].engram->table.data, stored("tiny-v41-native", "layers.2.engram.embed.weight"));
  EXPECT_EQ(m.weights.layers[0].engram->wkv.dense.shape, (std::vector<int64_t>{5 * 24, 2 * 32}));
  EXPECT_EQ(m.weights.layers[4].attn.indexer->k_norm.data,
            stored("tiny-v41-native", "layers.4.attn.indexer.k_norm.weight"));
  EXPECT_EQ(m.weights.layers[3].moe.experts[2].down.dense.data,
            stored("tiny-v41-native", "layers.3.ffn.experts.2.w2.weight"));
}

TEST(LoaderV41, EngramLayoutMatchesTransformers) {
  for (const char* name : {"tiny-v41", "tiny-v41-native"}) {
    SCOPED_TRACE(name);
    const auto m = load_fixture(name);
    const auto& e = m.engram;
    const auto ref = Checkpoint::open_file(kFixtures / name / "reference.safetensors");
    const auto map = ref.read_i64("engram.token_map", {31});
    EXPECT_EQ(std::vector<int64_t>(e.token_map.begin(), e.token_map.end()), map);
    EXPECT_EQ(e.pad_class, map[30]);  // engram_pad_token_id 30 (<pad>)
    // Primes and offsets are computed from the config; transformers' own values are the check.
    const auto primes = ref.read_i64("engram.primes", ref.find("engram.primes")->shape);
    const auto offsets = ref.read_i64("engram.offsets", ref.find("engram.offsets")->shape);
    std::vector<int64_t> mine_primes, mine_offsets;
    for (size_t k = 0; k < e.modulus.size(); ++k) {
      mine_primes.insert(mine_primes.end(), e.modulus[k].begin(), e.modulus[k].end());
      mine_offsets.insert(mine_offsets.end(), e.offset[k].begin(), e.offset[k].end());
    }
    EXPECT_EQ(mine_primes, primes);
    EXPECT_EQ(mine_offsets, offsets);
  }
}

TEST(LoaderV41, ReleasedTableSizesFollowFromThePrimeRule) {
  // dsv41-model.md §1: layers 1 and 14 of V4.1-Flash hash into 384006168 and 384016682 rows.
  EngramConfig e;
  e.layer_ids = {1, 14};
  e.hash_vocab_size = 16000000;
  e.max_ngram_size = 4;
  e.n_heads = 8;
  const auto primes = engram_primes(e);
  ASSERT_EQ(primes.size(), 2u);
  int64_t rows[2] = {0, 0};
  for (int k = 0; k < 2; ++k)
    for (int64_t p : primes[k]) rows[k] += p;
  EXPECT_EQ(rows[0], 384006168);
  EXPECT_EQ(rows[1], 384016682);
}

TEST(LoaderV41, MissingTensorIsNamed) {
  test::TempDir dir;
  write_edited_copy(dir, "tiny-v41-native", [](auto& specs) {
    std::erase_if(specs, [](const auto& s) { return s.name == "layers.2.attn.indexer.wk.weight"; });
  });
  const auto msg = load_error(dir);
  EXPECT_THAT(msg, HasSubstr("lacks tensor 'layers.2.attn.indexer.wk.weight'"));
  EXPECT_THAT(msg, HasSubstr("model.layers.2.self_attn.indexer.k_proj.weight"));  // the other spelling tried
}

TEST(LoaderV41, MisshapenTensorIsNamed) {
  test::TempDir dir;
  write_edited_copy(dir, "tiny-v41", [](auto& specs) {
    for (auto& s : specs)
      if (s.name == "model.engram_tables.1.weight") s.shape = {422, 16};  // same bytes, wrong shape
  });
  const auto msg = load_error(dir);
  EXPECT_THAT(msg, HasSubstr("model.engram_tables.1.weight"));
  EXPECT_THAT(msg, HasSubstr("211"));
}

TEST(LoaderV41, VisionAndDraftTensorsAreSkippedWithANote) {
  test::TempDir dir;
  write_edited_copy(dir, "tiny-v41-native", [](auto& specs) {
    const std::string four_floats(16, '\0');
    specs.push_back({"vision.blocks.0.attn.qkv.weight", "F32", {2, 2}, four_floats});
    specs.push_back({"image_newline", "F32", {4}, four_floats});
    specs.push_back({"mtp.0.main_norm.weight", "F32", {4}, four_floats});
    specs.push_back({"layers.0.something_new", "F32", {4}, four_floats});
  });
  const auto m = load_v41_model(dir.path(), dir / "reference.safetensors");
  EXPECT_THAT(m.notes, ElementsAre(HasSubstr("2 vision tensors"), HasSubstr("1 DSpark draft tensors")));
  EXPECT_THAT(m.unused_tensors, ElementsAre("layers.0.something_new"));
}

TEST(LoaderV41, FloatTableWithRealScalesIsRefused) {
  test::TempDir dir;
  write_edited_copy(dir, "tiny-v41", [](auto& specs) {
    for (auto& s : specs)
      if (s.name == "model.engram_tables.4.weight_scale_inv") {
        const float two = 2.0f;
        std::memcpy(s.data.data(), &two, sizeof two);
      }
  });
  EXPECT_THAT(load_error(dir), HasSubstr("scales other than 1"));
}

TEST(LoaderV41, EngramDataErrors) {
  {
    test::TempDir dir;
    write_edited_copy(dir, "tiny-v41", [](auto&) {});
    EXPECT_THAT(
        [&] {
          try {
            load_v41_model(dir.path());
          } catch (const Error& e) {
            return std::string(e.what());
          }
          return std::string("no error");
        }(),
        HasSubstr("engram_hash.safetensors' does not exist"));
  }
  const auto edit_reference = [](const char* tensor, const std::function<void(test::TensorSpec&)>& f) {
    return [=](std::vector<test::TensorSpec>& specs) {
      for (auto& s : specs)
        if (s.name == tensor) f(s);
    };
  };
  const auto set_i64 = [](test::TensorSpec& s, size_t i, int64_t v) { std::memcpy(s.data.data() + 8 * i, &v, 8); };
  struct Case {
    const char* tensor;
    std::function<void(test::TensorSpec&)> edit;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"engram.token_map", [&](auto& s) { set_i64(s, 3, 20); }, "classes 0..20, but engram_compressed_vocab_size is 20"},
      {"engram.multipliers", [&](auto& s) { set_i64(s, 1, 4); }, "multiplier 4 is not an odd number"},
      {"engram.primes", [&](auto& s) { set_i64(s, 0, 101); }, "made for another config"},  // 67 is right
      {"engram.multipliers", [&](auto& s) { s.name = "engram.multiplier"; }, "engram.multipliers"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.error);
    test::TempDir dir;
    write_edited_copy(dir, "tiny-v41", edit_reference(c.tensor, c.edit), "reference.safetensors");
    EXPECT_THAT(load_error(dir), HasSubstr(c.error));
  }
  // A config whose table size is not the sum of the layer's primes.
  auto config = read_config_json(kFixtures / "tiny-v41");
  config["text_config"]["engram_num_embeddings"] = {211, 250};
  try {
    load_engram_layout(parse_v41_config(config), kFixtures / "tiny-v41" / "reference.safetensors");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("engram_num_embeddings[1] = 250, but Engram layer 4 hashes into 251 rows"));
  }
}

}  // namespace
}  // namespace frank::model
