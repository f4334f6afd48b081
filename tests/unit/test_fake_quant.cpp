// DeepSeek-V4.1's QAT rounding (engine/fake_quant.h) against transformers' own fake-quantisers:
// tests/fixtures/dsv41/fake_quant.safetensors holds rows that reach every branch (ties on the e2m1
// grid, values one ulp either side of them, subnormal e4m3 scales, the amax floors, signed zeros,
// magnitudes over 12 decades) and transformers' outputs (make_dsv41_quant_fixtures.py). The
// rounding is exact arithmetic, so the outputs must agree bit for bit; plus hand-worked cases.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <vector>

#include "frank/engine/fake_quant.h"
#include "frank/model/checkpoint.h"

namespace frank::engine {
namespace {

const std::filesystem::path kFile = std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv41" / "fake_quant.safetensors";

void expect_matches_transformers(const char* name, int block, void (*quantise)(float*, int64_t, int)) {
  SCOPED_TRACE(name);
  const auto file = model::Checkpoint::open_file(kFile);
  const auto* info = file.find(std::string(name) + ".in");
  ASSERT_NE(info, nullptr);
  ASSERT_EQ(info->shape.size(), 2u);
  ASSERT_EQ(info->shape[1], block);
  std::vector<float> x = file.read_f32(std::string(name) + ".in", info->shape);
  const std::vector<float> want = file.read_f32(std::string(name) + ".out", info->shape);
  for (int64_t r = 0; r < info->shape[0]; ++r) quantise(x.data() + r * block, block, block);
  int mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (std::bit_cast<uint32_t>(x[i]) != std::bit_cast<uint32_t>(want[i]) && mismatches++ < 5)
      ADD_FAILURE() << "row " << i / block << " value " << i % block << ": frank " << x[i] << " transformers "
                    << want[i];
  EXPECT_EQ(mismatches, 0);
}

TEST(FakeQuant, Fp8WindowRowsMatchTransformers) {
  expect_matches_transformers("fp8_ue8m0_32", 32, fake_quant_fp8_ue8m0);
}
TEST(FakeQuant, Fp4EntriesMatchTransformers) { expect_matches_transformers("fp4_e4m3_16", 16, fake_quant_fp4_e4m3); }
TEST(FakeQuant, Fp4IndexerMatchesTransformers) {
  expect_matches_transformers("fp4_ue8m0_32", 32, fake_quant_fp4_ue8m0);
}

TEST(FakeQuant, E2m1TiesGoToTheEvenCode) {
  // Grid 0, .5, 1, 1.5, 2, 3, 4, 6 (codes 0..7): 0.25 -> 0 and 0.75 -> 1 (code 2), 1.25 -> 1 (code 2),
  // 1.75 -> 2 (code 4), 2.5 -> 2, 3.5 -> 4 (code 6), 5 -> 4 (code 6); the sign is bit 3.
  EXPECT_EQ(e2m1_code(0.25f), 0);
  EXPECT_EQ(e2m1_code(0.75f), 2);
  EXPECT_EQ(e2m1_code(1.25f), 2);
  EXPECT_EQ(e2m1_code(1.75f), 4);
  EXPECT_EQ(e2m1_code(2.5f), 4);
  EXPECT_EQ(e2m1_code(3.5f), 6);
  EXPECT_EQ(e2m1_code(5.0f), 6);
  EXPECT_EQ(e2m1_code(std::nextafter(0.25f, 1.0f)), 1);
  EXPECT_EQ(e2m1_code(-6.0f), 0xF);
  EXPECT_EQ(e2m1_code(-0.0f), 0x8);
}

TEST(FakeQuant, Pow2CeilFromTheBits) {
  EXPECT_EQ(pow2_ceil(1.0f), 1.0f);
  EXPECT_EQ(pow2_ceil(std::nextafter(1.0f, 2.0f)), 2.0f);
  EXPECT_EQ(pow2_ceil(0.3f), 0.5f);
  EXPECT_EQ(pow2_ceil(1e-40f), 0x1p-126f);  // every subnormal gives 2^-126
}

TEST(FakeQuant, WidthsTheBlockDoesNotDivideStayUnrounded) {
  std::vector<float> x{0.123f, 0.456f, 0.789f};
  const auto before = x;
  fake_quant_fp4_e4m3(x.data(), 3, 16);
  EXPECT_EQ(x, before);
}

}  // namespace
}  // namespace frank::engine
