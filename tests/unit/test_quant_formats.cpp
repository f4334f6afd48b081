// FP8 (e4m3 + ue8m0 blocks) and FP4 (e2m1 + ue8m0 groups) decoding against ml_dtypes' tables,
// dequantize() against numpy's float64 products, and rejection of malformed views.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "frank/core/error.h"
#include "frank/cpu/ops.h"
#include "frank/cpu/quant/quant_formats.h"
#include "unit/quant_test_util.h"

namespace frank::cpu {
namespace {

using test::QuantGolden;

nlohmann::json value_tables() {
  std::ifstream in(test::quant_fixture_dir() / "values.json");
  return nlohmann::json::parse(in);
}

// Bit-for-bit: -0.0 must stay -0.0 and NaN must stay NaN.
void expect_same_value(float ours, const nlohmann::json& golden, const std::string& what) {
  if (golden.is_null()) {
    EXPECT_TRUE(std::isnan(ours)) << what;
  } else {
    EXPECT_EQ(std::bit_cast<uint32_t>(ours), std::bit_cast<uint32_t>(golden.get<float>())) << what << " = " << ours;
  }
}

TEST(QuantFormats, DecodersMatchMlDtypesBitForBit) {
  const auto tables = value_tables();
  ASSERT_EQ(tables["e4m3fn"].size(), 256u);
  ASSERT_EQ(tables["e2m1fn"].size(), 16u);
  ASSERT_EQ(tables["e8m0fnu"].size(), 256u);
  for (int b = 0; b < 256; ++b) {
    expect_same_value(e4m3_value(static_cast<uint8_t>(b)), tables["e4m3fn"][b], "e4m3 byte " + std::to_string(b));
    expect_same_value(ue8m0_value(static_cast<uint8_t>(b)), tables["e8m0fnu"][b], "ue8m0 byte " + std::to_string(b));
    EXPECT_EQ(std::bit_cast<uint32_t>(e4m3_table()[b]), std::bit_cast<uint32_t>(e4m3_value(static_cast<uint8_t>(b))));
    EXPECT_EQ(std::bit_cast<uint32_t>(ue8m0_table()[b]), std::bit_cast<uint32_t>(ue8m0_value(static_cast<uint8_t>(b))));
  }
  for (int nibble = 0; nibble < 16; ++nibble) {
    expect_same_value(e2m1_value(static_cast<uint8_t>(nibble)), tables["e2m1fn"][nibble], "e2m1 " + std::to_string(nibble));
    EXPECT_EQ(std::bit_cast<uint32_t>(e2m1_value(static_cast<uint8_t>(0xF0 | nibble))),
              std::bit_cast<uint32_t>(e2m1_value(static_cast<uint8_t>(nibble))))
        << "only the low nibble counts";
  }
}

// dequantize() then a float64 dot must reproduce numpy's float64 y up to float64 rounding: each of
// the two sums is within gamma(cols) * sum|W x| with u = 2^-53, so 2 * cols * 2^-52 is ample.
template <typename Matrix>
void expect_dequantized_matches(const QuantGolden& golden, const std::string& name, const Matrix& w) {
  std::vector<float> dense(static_cast<size_t>(w.rows * w.cols));
  dequantize(w, dense.data());
  const auto x = golden.get<float>(name + ".x8");
  const auto y = golden.get<double>(name + ".y8");
  const auto yabs = golden.get<double>(name + ".yabs8");
  for (int64_t t = 0; t < 8; ++t)
    for (int64_t i = 0; i < w.rows; ++i) {
      const double ours = dot(dense.data() + i * w.cols, x.data() + t * w.cols, w.cols);
      const size_t k = static_cast<size_t>(t * w.rows + i);
      EXPECT_LE(std::abs(ours - y[k]), 2.0 * static_cast<double>(w.cols) * 0x1p-52 * yabs[k]) << name << " t " << t << " row " << i;
    }
}

TEST(QuantFormats, DequantizeMatchesNumpy) {
  const QuantGolden golden;
  for (const std::string name : {"fp8_b128_200x300", "fp8_b32_70x96", "fp8_b32_33x50"}) {
    const auto weight = golden.get<uint8_t>(name + ".weight");
    const auto scales = golden.get<uint8_t>(name + ".scales");
    const auto& shape = golden.shape(name + ".weight");
    const Fp8BlockMatrix w{weight.data(), scales.data(), shape[0], shape[1], std::stoi(golden.metadata(name + ".block"))};
    ASSERT_EQ(golden.shape(name + ".scales"), (std::vector<int64_t>{w.scale_rows(), w.scale_cols()}));
    expect_dequantized_matches(golden, name, w);
  }
  for (const std::string name : {"fp4_64x96", "fp4_40x256"}) {
    const auto packed = golden.get<uint8_t>(name + ".packed");
    const auto scales = golden.get<uint8_t>(name + ".scales");
    const auto& shape = golden.shape(name + ".packed");
    const Fp4Matrix w{packed.data(), scales.data(), shape[0], 2 * shape[1]};
    ASSERT_EQ(golden.shape(name + ".scales"), (std::vector<int64_t>{w.rows, w.scale_cols()}));
    expect_dequantized_matches(golden, name, w);
  }
}

TEST(QuantFormats, MalformedViewsAreRejected) {
  const uint8_t bytes[64] = {};
  using ::testing::HasSubstr;
  using ::testing::ThrowsMessage;
  EXPECT_THAT([&] { validate(Fp8BlockMatrix{bytes, bytes, 4, 4, 64}); },
              ThrowsMessage<Error>(HasSubstr("block size 64 (expected 128 or 32)")));
  EXPECT_THAT([&] { validate(Fp8BlockMatrix{bytes, bytes, -1, 4, 128}); }, ThrowsMessage<Error>(HasSubstr("negative shape")));
  EXPECT_THAT([&] { validate(Fp8BlockMatrix{nullptr, bytes, 4, 4, 32}); }, ThrowsMessage<Error>(HasSubstr("null")));
  EXPECT_THAT([&] { validate(Fp4Matrix{bytes, bytes, 2, 48}); },
              ThrowsMessage<Error>(HasSubstr("48 columns is not a multiple of 32")));
  EXPECT_THAT([&] { validate(Fp4Matrix{bytes, nullptr, 2, 32}); }, ThrowsMessage<Error>(HasSubstr("null")));
  std::vector<float> out(64);
  EXPECT_THROW(dequantize(Fp4Matrix{bytes, bytes, 1, 16}, out.data()), Error);
  EXPECT_NO_THROW(validate(Fp8BlockMatrix{nullptr, nullptr, 0, 5, 128}));  // empty is fine
}

}  // namespace
}  // namespace frank::cpu
