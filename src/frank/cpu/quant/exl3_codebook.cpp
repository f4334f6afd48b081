#include "frank/cpu/quant/exl3_codebook.h"

#include "frank/core/dtype.h"

namespace frank::cpu {
namespace {

// 3INST and MCG: a 32-bit hash of the state, (y & 0x8FFF8FFF) ^ 0x3B603B60 (one `lop3` on the GPU),
// read as two fp16 halves and added. The mask and xor force each half to +-[0.125, 2), so both
// are fp16 with 11 significant bits and exponents -3..0: their sum needs at most 15 bits and is
// exact in fp32. Rounding that sum to fp16 once is exactly __hadd.
std::uint16_t sum_of_halves(std::uint32_t hash) {
  const std::uint32_t y = (hash & 0x8FFF8FFFu) ^ 0x3B603B60u;
  const float low = f16_to_f32(static_cast<std::uint16_t>(y & 0xFFFFu));
  const float high = f16_to_f32(static_cast<std::uint16_t>(y >> 16));
  return f32_to_f16(low + high);
}

// MUL1: s = the sum of the four bytes of state * 0x83DCD12D (0..1020); the kernel builds the fp16
// 1024 + s (bits 0x6400 + s) and computes fma(1024 + s, k_inv, k_bias) with one rounding.
// k_inv = 0x1EEE = 1774 * 2^-18 and k_bias = 0xC931 = -1329 * 2^-7 = -2721792 * 2^-18, so the exact
// result is ((1024 + s) * 1774 - 2721792) * 2^-18: an integer below 2^20 in magnitude times a power
// of two. The fp32 product and sum below are therefore exact, and the one rounding is to fp16.
// (Rounding the product to fp16 first, as a separate fp16 multiply would, is wrong for 92% of states.)
std::uint16_t mul1_value(std::uint16_t state) {
  const std::uint32_t y = static_cast<std::uint32_t>(state) * kExl3Mul1Multiplier;
  const std::uint32_t byte_sum = (y & 0xFFu) + ((y >> 8) & 0xFFu) + ((y >> 16) & 0xFFu) + (y >> 24);
  return f32_to_f16(static_cast<float>(1024u + byte_sum) * kExl3Mul1Inv + kExl3Mul1Bias);
}

}  // namespace

std::string_view exl3_codebook_name(Exl3Codebook codebook) {
  switch (codebook) {
    case Exl3Codebook::ThreeInst: return "3inst";
    case Exl3Codebook::Mcg: return "mcg";
    case Exl3Codebook::Mul1: return "mul1";
  }
  return "unknown";
}

// The multipliers and the 3INST increment are the ones locked upstream on 2025-10-12; arithmetic is
// modulo 2^32, as uint32 multiplication on the GPU.
std::uint16_t exl3_codebook_value(Exl3Codebook codebook, std::uint16_t state) {
  const std::uint32_t x = state;
  switch (codebook) {
    case Exl3Codebook::ThreeInst: return sum_of_halves(x * kExl3ThreeInstMultiplier + kExl3ThreeInstIncrement);
    case Exl3Codebook::Mcg: return sum_of_halves(x * kExl3McgMultiplier);
    case Exl3Codebook::Mul1: return mul1_value(state);
  }
  return 0;
}

}  // namespace frank::cpu
