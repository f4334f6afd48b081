// The GPU's FP8 / FP4 weight layout and bit-level decoders (frank/cuda/weight_format.h,
// native_weight.h, fp8_fp4_decode.h), checked on the CPU: every e4m3 and e2m1 code in every
// position of a word decodes to cpu::e4m3_value / e2m1_value (themselves checked against
// ml_dtypes, test_quant_formats.cpp) times the documented power of two, whatever the word's other
// bytes hold; the native buffer holds the shipped bytes where the kernels read them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "frank/core/error.h"
#include "frank/core/splitmix64.h"
#include "frank/cpu/quant/quant_formats.h"
#include "frank/cuda/fp8_fp4_decode.h"
#include "frank/cuda/native_weight.h"

namespace frank::test {
namespace {

using cuda::WeightType;

// IEEE binary16 bits to their value (subnormals: mantissa * 2^-24; no inf / NaN expected here).
double fp16_value(uint32_t bits) {
  const int sign = (bits >> 15) & 1, exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  EXPECT_NE(exponent, 0x1f) << "an inf / NaN fp16 from bits " << bits;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -magnitude : magnitude;
}

double low_half(uint32_t pair) { return fp16_value(pair & 0xffffu); }
double high_half(uint32_t pair) { return fp16_value(pair >> 16); }

// e4m3fn's two NaN codes read as +-480 (their bits as a finite value; fp8_fp4_decode.h).
double e4m3_expected(uint8_t b) {
  if ((b & 0x7f) == 0x7f) return b & 0x80 ? -480.0 : 480.0;
  return cpu::e4m3_value(b);
}

TEST(CudaFp8Decode, EveryCodeInEveryByteOfAWord) {
  SplitMix64 rng(7);
  const double unit = std::ldexp(1.0, cuda::kE4m3Fp16Shift);
  for (int code = 0; code < 256; ++code)
    for (int trial = 0; trial < 8; ++trial) {
      const uint32_t noise = static_cast<uint32_t>(rng());
      const auto b = static_cast<uint8_t>(code);
      // The code in byte j, random bytes elsewhere.
      uint32_t w[4];
      for (int j = 0; j < 4; ++j) w[j] = (noise & ~(0xffu << (8 * j))) | (uint32_t{b} << (8 * j));
      const double want = e4m3_expected(b);
      EXPECT_EQ(low_half(cuda::e4m3_pair_02(w[0])) * unit, want) << "byte 0, code " << code;
      EXPECT_EQ(high_half(cuda::e4m3_pair_02(w[2])) * unit, want) << "byte 2, code " << code;
      EXPECT_EQ(low_half(cuda::e4m3_pair_13(w[1])) * unit, want) << "byte 1, code " << code;
      EXPECT_EQ(high_half(cuda::e4m3_pair_13(w[3])) * unit, want) << "byte 3, code " << code;
    }
}

template <int J>
void expect_e2m1_pair(uint32_t word, double want_low, double want_high, int code) {
  const double unit = std::ldexp(1.0, cuda::kE2m1Fp16Shift);
  const uint32_t pair = cuda::e2m1_pair<J>(word);
  EXPECT_EQ(low_half(pair) * unit, want_low) << "nibble " << J << ", code " << code;
  EXPECT_EQ(high_half(pair) * unit, want_high) << "nibble " << J + 4 << ", code " << code;
}

TEST(CudaFp4Decode, EveryCodeInEveryNibbleOfAWord) {
  SplitMix64 rng(11);
  for (int code = 0; code < 16; ++code)
    for (int trial = 0; trial < 16; ++trial) {
      // The code in nibble j, random nibbles elsewhere; the pair's other half is checked too.
      const uint32_t noise = static_cast<uint32_t>(rng());
      for (int j = 0; j < 8; ++j) {
        const uint32_t word = (noise & ~(0xfu << (4 * j))) | (uint32_t(code) << (4 * j));
        const auto value = [&](int k) { return static_cast<double>(cpu::e2m1_value((word >> (4 * k)) & 0xf)); };
        switch (j % 4) {
          case 0:
            expect_e2m1_pair<0>(word, value(0), value(4), code);
            break;
          case 1:
            expect_e2m1_pair<1>(word, value(1), value(5), code);
            break;
          case 2:
            expect_e2m1_pair<2>(word, value(2), value(6), code);
            break;
          default:
            expect_e2m1_pair<3>(word, value(3), value(7), code);
        }
      }
    }
}

QuantizedMatrix matrix(QuantizedMatrix::Format format, int64_t rows, int64_t cols, int block, size_t values,
                       size_t scales) {
  QuantizedMatrix q;
  q.format = format, q.rows = rows, q.cols = cols, q.block = block;
  for (size_t i = 0; i < values; ++i) q.values.push_back(static_cast<uint8_t>(i * 7 + 1));
  for (size_t i = 0; i < scales; ++i) q.scales.push_back(static_cast<uint8_t>(100 + i));
  return q;
}

// The buffer is the values, zeros to a 16-byte boundary, the scales: checked byte by byte.
void expect_native_layout(const QuantizedMatrix& q, WeightType type, size_t scale_offset) {
  EXPECT_EQ(cuda::native_type(q), type);
  const std::vector<uint8_t> bytes = cuda::native_bytes(q);
  ASSERT_EQ(bytes.size(), scale_offset + q.scales.size());
  EXPECT_EQ(static_cast<int64_t>(scale_offset), cuda::weight_scale_offset(type, q.rows, q.cols));
  for (size_t i = 0; i < q.values.size(); ++i) ASSERT_EQ(bytes[i], q.values[i]) << i;
  for (size_t i = q.values.size(); i < scale_offset; ++i) ASSERT_EQ(bytes[i], 0) << i;
  for (size_t i = 0; i < q.scales.size(); ++i) ASSERT_EQ(bytes[scale_offset + i], q.scales[i]) << i;
}

TEST(CudaNativeWeight, Fp8BlocksKeepTheShippedBytes) {
  // [37, 45]: 1665 value bytes (padded to 1680); blocks of 32: 2 x 2 scales, of 128: 1 x 1.
  expect_native_layout(matrix(QuantizedMatrix::Format::Fp8Block, 37, 45, 32, 37 * 45, 4), WeightType::Fp8Block32,
                       1680);
  expect_native_layout(matrix(QuantizedMatrix::Format::Fp8Block, 37, 45, 128, 37 * 45, 1), WeightType::Fp8Block128,
                       1680);
  // [256, 384] with blocks of 128: 98304 value bytes (a multiple of 16), 2 x 3 scales.
  expect_native_layout(matrix(QuantizedMatrix::Format::Fp8Block, 256, 384, 128, 256 * 384, 6),
                       WeightType::Fp8Block128, 256 * 384);
  EXPECT_EQ(cuda::weight_bytes(WeightType::Fp8Block128, 256, 384), 256 * 384 + 6);
}

TEST(CudaNativeWeight, Fp4KeepsTheShippedBytes) {
  // [3, 64]: 96 value bytes, 3 x 2 scales; [5, 32]: 80 value bytes, 5 scales.
  expect_native_layout(matrix(QuantizedMatrix::Format::Fp4, 3, 64, 0, 96, 6), WeightType::Fp4, 96);
  expect_native_layout(matrix(QuantizedMatrix::Format::Fp4, 5, 32, 0, 80, 5), WeightType::Fp4, 80);
  EXPECT_EQ(cuda::weight_bytes(WeightType::Fp4, 7, 96), 7 * 48 + 7 * 3);
}

TEST(CudaNativeWeight, InconsistentMatricesAreRefused) {
  EXPECT_THROW(cuda::native_bytes(matrix(QuantizedMatrix::Format::Fp4, 3, 64, 0, 95, 6)), Error);
  EXPECT_THROW(cuda::native_bytes(matrix(QuantizedMatrix::Format::Fp8Block, 37, 45, 32, 37 * 45, 1)), Error);
  EXPECT_THROW(cuda::native_type(matrix(QuantizedMatrix::Format::Fp8Block, 4, 4, 64, 16, 1)), Error);
  EXPECT_THROW(cuda::native_type(matrix(QuantizedMatrix::Format::Exl3, 16, 16, 0, 0, 0)), Error);
}

}  // namespace
}  // namespace frank::test
