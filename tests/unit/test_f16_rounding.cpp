// f32_to_f16: round to nearest, ties to even, checked against properties of the fp16 grid rather
// than against another converter: every fp16 value converts back to itself, and points between two
// neighbours go to the nearer one (to the even one at the exact midpoint).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "frank/core/dtype.h"

namespace frank {
namespace {

TEST(F16Rounding, EveryFp16ValueRoundTrips) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float value = f16_to_f32(bits);
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(value)))) << std::hex << h;
    } else {
      EXPECT_EQ(f32_to_f16(value), bits) << std::hex << h;
    }
  }
}

// Neighbours a < b (bit patterns h, h + 1 of the same sign) have a midpoint with at most 12
// significant bits, exact in fp32; the fp32 values just beside it are not midpoints.
TEST(F16Rounding, MidpointsTieToEvenAndNeighboursGoToTheNearer) {
  for (std::uint32_t h = 0; h < 0x7BFFu; ++h)
    for (const std::uint16_t sign : {std::uint16_t{0}, std::uint16_t{0x8000}}) {
      const auto lo = static_cast<std::uint16_t>(sign | h), hi = static_cast<std::uint16_t>(sign | (h + 1));
      const float a = f16_to_f32(lo), b = f16_to_f32(hi);
      const float mid = static_cast<float>((static_cast<double>(a) + b) / 2);
      ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(a) + b) / 2) << std::hex << h;
      EXPECT_EQ(f32_to_f16(mid), (h % 2 == 0) ? lo : hi) << std::hex << h;
      EXPECT_EQ(f32_to_f16(std::nextafter(mid, a)), lo) << std::hex << h;
      EXPECT_EQ(f32_to_f16(std::nextafter(mid, b)), hi) << std::hex << h;
    }
}

TEST(F16Rounding, OverflowUnderflowAndSpecials) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);                         // the largest finite fp16
  EXPECT_EQ(f32_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7BFF);   // below the midpoint to 65536
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);                         // the midpoint ties to even: inf
  EXPECT_EQ(f32_to_f16(-1e30f), 0xFC00);
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7C00);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);                         // half the smallest subnormal: tie to 0
  EXPECT_EQ(f32_to_f16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(-0x1p-26f), 0x8000);                        // -0 keeps its sign
  EXPECT_EQ(f32_to_f16(0x1p-149f), 0x0000);                        // fp32 subnormal
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);                     // 1.5 units: tie to even 2
  const std::uint16_t nan = f32_to_f16(-NAN);
  EXPECT_EQ(nan & 0xFC00, 0xFC00);
  EXPECT_NE(nan & 0x03FF, 0);
}

}  // namespace
}  // namespace frank
