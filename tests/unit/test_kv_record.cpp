// The K=V row records (engine/kv_record.h) against golden records that numpy + ml_dtypes made
// independently (tools/reference/make_kv_record_fixtures.py): byte for byte, and decoding back.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "frank/core/error.h"
#include "frank/cpu/quant/quant_formats.h"
#include "frank/core/dtype.h"
#include "frank/engine/kv_record.h"

namespace frank::engine {
namespace {

const nlohmann::json& golden() {
  static const nlohmann::json g = [] {
    std::ifstream in(std::string(FRANK_FIXTURE_DIR) + "/kv_record/records.json");
    if (!in) throw Error("tests/fixtures/kv_record/records.json is missing");
    return nlohmann::json::parse(in);
  }();
  return g;
}

std::vector<float> row_values(const nlohmann::json& record) {
  std::vector<float> v;
  for (const auto& b : record["values"]) v.push_back(std::bit_cast<float>(b.get<uint32_t>()));
  return v;
}

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

TEST(KvRecord, E4m3ConversionMatchesMlDtypes) {
  for (const auto& pair : golden()["e4m3_saturating"]) {
    const float x = std::bit_cast<float>(pair[0].get<uint32_t>());
    EXPECT_EQ(float_to_e4m3_saturating(x), pair[1].get<int>()) << "x = " << x;
  }
}

TEST(KvRecord, Bf16ConversionMatchesMlDtypes) {
  for (const auto& pair : golden()["bf16"]) {
    const float x = std::bit_cast<float>(pair[0].get<uint32_t>());
    EXPECT_EQ(float_to_bf16(x), pair[1].get<int>()) << "x = " << x;
  }
}

TEST(KvRecord, LayoutOfDeepSeekV4Rows) {
  // 448 e4m3 + 64 bf16 (128 B) + 7 scales + 1 pad.
  const KvRowLayout fp8 = kv_row_layout(KvFormat::FP8, 512, 64);
  EXPECT_EQ(fp8.row_bytes, 584);
  EXPECT_EQ(fp8.rope_offset, 448);
  EXPECT_EQ(fp8.scale_offset, 576);
  EXPECT_EQ(kv_row_layout(KvFormat::BF16, 512, 64).row_bytes, 1024);
  EXPECT_EQ(kv_row_layout(KvFormat::F32, 512, 64).row_bytes, 2048);
  // The tiny test models: 24 nope values in one short block, 8 RoPE dims: 24 + 16 + 1 -> 48.
  EXPECT_EQ(kv_row_layout(KvFormat::FP8, 32, 8).row_bytes, 48);
  EXPECT_THROW(kv_row_layout(KvFormat::FP8, 30, 8), Error);
  EXPECT_THROW(kv_row_layout(KvFormat::FP8, 32, 6), Error);
  EXPECT_THROW(kv_row_layout(KvFormat::FP8, 32, 36), Error);
}

TEST(KvRecord, EncodesTheGoldenRecordsBitForBit) {
  for (const auto& r : golden()["records"]) {
    const std::string name = r["name"];
    const auto values = row_values(r);
    for (const auto& [format, key] : {std::pair{KvFormat::FP8, "fp8"}, std::pair{KvFormat::BF16, "bf16"}}) {
      const KvRowLayout l = kv_row_layout(format, r["dim"].get<int>(), r["rope_dims"].get<int>());
      const auto want = from_hex(r[key].get<std::string>());
      ASSERT_EQ(static_cast<int>(want.size()), l.row_bytes) << name << " " << key;
      std::vector<uint8_t> got(static_cast<size_t>(l.row_bytes), 0xAB);
      encode_kv_row(l, values, got);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << name << " " << key << ": byte " << i << " of " << want.size();
    }
  }
}

// Decoding is the e4m3 value times the block's power of two (nope), the bf16 value (RoPE dims):
// checked against ml_dtypes' own reading of the golden bytes, with the record's parts located by
// the layout the script documents, not by the decoder.
TEST(KvRecord, DecodesTheGoldenRecords) {
  for (const auto& r : golden()["records"]) {
    const int dim = r["dim"], rope = r["rope_dims"], nope = dim - rope;
    const auto bytes = from_hex(r["fp8"].get<std::string>());
    const KvRowLayout l = kv_row_layout(KvFormat::FP8, dim, rope);
    std::vector<float> got(static_cast<size_t>(dim));
    decode_kv_row(l, bytes, got);
    for (int i = 0; i < dim; ++i) {
      float want;
      if (i < nope) {
        want = cpu::e4m3_value(bytes[i]) * std::ldexp(1.f, bytes[nope + 2 * rope + i / 64] - 127);
      } else {
        const int at = nope + 2 * (i - nope);
        want = bf16_to_f32(static_cast<uint16_t>(bytes[at] | (bytes[at + 1] << 8)));
      }
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << r["name"] << " value " << i;
    }
  }
}

// Encoding what was decoded gives the same values again (what window_store does to a row the
// chunk already saw rounded): the record is a fixed point.
TEST(KvRecord, RoundTripIsAFixedPoint) {
  for (const auto& r : golden()["records"]) {
    const auto values = row_values(r);
    for (KvFormat f : {KvFormat::FP8, KvFormat::BF16, KvFormat::F32}) {
      const KvRowLayout l = kv_row_layout(f, r["dim"].get<int>(), r["rope_dims"].get<int>());
      std::vector<uint8_t> once(static_cast<size_t>(l.row_bytes)), twice(once.size());
      std::vector<float> a(values.size()), b(values.size());
      encode_kv_row(l, values, once);
      decode_kv_row(l, once, a);
      encode_kv_row(l, a, twice);
      decode_kv_row(l, twice, b);
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << r["name"] << " " << kv_format_name(f) << " " << i;
    }
  }
}

TEST(KvRecord, ScaleExponentIsTheCeilingOfLog2) {
  EXPECT_EQ(kv_scale_exponent(0.f), -22);       // 1e-4 / 448 = 2.2e-7, 2^-22 = 2.4e-7
  EXPECT_EQ(kv_scale_exponent(448.f), 0);       // exactly 1
  EXPECT_EQ(kv_scale_exponent(448.0001f), 1);   // just past 1
  EXPECT_EQ(kv_scale_exponent(224.f), -1);
  EXPECT_EQ(kv_scale_exponent(1.f), -8);        // 1/448 = 2^-8.8
}

TEST(KvRecord, BadInputIsRefused) {
  EXPECT_THROW(parse_kv_format("fp16"), Error);
  EXPECT_EQ(parse_kv_format("fp8"), KvFormat::FP8);
  const KvRowLayout l = kv_row_layout(KvFormat::FP8, 32, 8);
  std::vector<float> values(31);
  std::vector<uint8_t> bytes(static_cast<size_t>(l.row_bytes));
  EXPECT_THROW(encode_kv_row(l, values, bytes), Error);
}

}  // namespace
}  // namespace frank::engine
