// Loading V4.1's DSpark drafter (mtp.*) from the DSpark fixture, and the errors for broken copies of it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "frank/core/error.h"
#include "frank/model/loader_v41.h"
#include "frank/model/safetensors.h"
#include "safetensors_test_util.h"

namespace frank::model {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kDir = std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv41-dspark" / "tiny-v41-dspark";
const std::filesystem::path kEngram =
    std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv41" / "tiny-v41-native" / "reference.safetensors";

// A copy of the fixture whose model.safetensors went through `edit`.
void write_edited_copy(const test::TempDir& dir, const std::function<void(std::vector<test::TensorSpec>&)>& edit) {
  std::filesystem::copy_file(kDir / "config.json", dir / "config.json");
  const auto st = SafetensorsFile::open(kDir / "model.safetensors");
  std::vector<test::TensorSpec> specs;
  for (const auto& [name, info] : st.tensors()) {
    const auto bytes = st.bytes(info);
    specs.push_back({name, info.dtype_name, info.shape,
                     std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())});
  }
  edit(specs);
  test::write_file(dir / "model.safetensors", test::build_safetensors(specs));
}

std::string load_error(const test::TempDir& dir) {
  try {
    load_v41_model(dir.path(), kEngram);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(LoaderDSpark, FixtureLoadsEveryDrafterTensor) {
  const auto m = load_v41_model(kDir, kEngram);
  EXPECT_TRUE(m.unused_tensors.empty());
  EXPECT_TRUE(m.notes.empty());
  ASSERT_TRUE(m.weights.dspark.has_value());
  const DSparkWeights& d = *m.weights.dspark;
  ASSERT_EQ(d.stages.size(), 3u);
  for (const auto& s : d.stages) {
    EXPECT_EQ(s.moe.experts.size(), 4u);  // dspark_n_routed_experts, not the main model's 4 by chance
    EXPECT_EQ(s.moe.selection_bias.numel(), 4);
    EXPECT_EQ(s.attn.sinks.numel(), 2);
  }
  EXPECT_EQ(d.main_proj.rows(), 24);
  EXPECT_EQ(d.main_proj.cols(), 72);
  EXPECT_EQ(d.markov_embed.shape, (std::vector<int64_t>{31, 8}));
  EXPECT_EQ(d.markov_head.rows(), 31);
  EXPECT_EQ(d.confidence.cols(), 32);
  EXPECT_EQ(d.norm.numel(), 24);
}

TEST(LoaderDSpark, CheckpointWithoutDrafterLoadsWithoutIt) {
  test::TempDir dir;
  write_edited_copy(dir, [](auto& specs) { std::erase_if(specs, [](const auto& s) { return s.name.starts_with("mtp."); }); });
  const auto m = load_v41_model(dir.path(), kEngram);
  EXPECT_FALSE(m.weights.dspark.has_value());
  EXPECT_TRUE(m.config.dspark.has_value());
}

TEST(LoaderDSpark, MissingDrafterTensorIsNamed) {
  test::TempDir dir;
  write_edited_copy(dir, [](auto& specs) {
    std::erase_if(specs, [](const auto& s) { return s.name == "mtp.1.ffn.gate.bias"; });
  });
  EXPECT_THAT(load_error(dir), HasSubstr("mtp.1.ffn.gate.bias"));
}

TEST(LoaderDSpark, MisshapenDrafterTensorIsNamed) {
  test::TempDir dir;
  write_edited_copy(dir, [](auto& specs) {
    for (auto& s : specs)
      if (s.name == "mtp.2.markov_head.embed.weight") s.shape = {8, 31};  // same bytes, transposed shape
  });
  const auto msg = load_error(dir);
  EXPECT_THAT(msg, HasSubstr("mtp.2.markov_head.embed.weight"));
  EXPECT_THAT(msg, HasSubstr("31"));
}

}  // namespace
}  // namespace frank::model
