#include "frank/core/dtype.h"

#include <bit>

namespace frank {

DType parse_dtype(std::string_view s) noexcept {
  struct Entry {
    std::string_view name;
    DType type;
  };
  // Canonical names first, then aliases produced by other writers (torch/ml_dtypes-style suffixes).
  static constexpr Entry kTable[] = {
      {"F32", DType::F32},         {"F16", DType::F16},           {"BF16", DType::BF16},
      {"F64", DType::F64},         {"I64", DType::I64},           {"I32", DType::I32},
      {"I16", DType::I16},         {"I8", DType::I8},             {"U8", DType::U8},
      {"U16", DType::U16},         {"U32", DType::U32},           {"U64", DType::U64},
      {"BOOL", DType::BOOL},       {"F8_E4M3", DType::F8_E4M3},   {"F8_E5M2", DType::F8_E5M2},
      {"F8_E8M0", DType::F8_E8M0}, {"F4", DType::F4},
      {"F8_E4M3FN", DType::F8_E4M3}, {"F8_E8M0FNU", DType::F8_E8M0},
      {"F4_E2M1", DType::F4},        {"F4_E2M1FN", DType::F4},   {"FP4", DType::F4},
  };
  for (const Entry& e : kTable)
    if (e.name == s) return e.type;
  return DType::Unknown;
}

std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F64: return "F64";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
    case DType::I16: return "I16";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::U16: return "U16";
    case DType::U32: return "U32";
    case DType::U64: return "U64";
    case DType::BOOL: return "BOOL";
    case DType::F8_E4M3: return "F8_E4M3";
    case DType::F8_E5M2: return "F8_E5M2";
    case DType::F8_E8M0: return "F8_E8M0";
    case DType::F4: return "F4";
    case DType::Unknown: break;
  }
  return "Unknown";
}

int dtype_bits(DType t) noexcept {
  switch (t) {
    case DType::F64: case DType::I64: case DType::U64: return 64;
    case DType::F32: case DType::I32: case DType::U32: return 32;
    case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 16;
    case DType::I8: case DType::U8: case DType::BOOL:
    case DType::F8_E4M3: case DType::F8_E5M2: case DType::F8_E8M0: return 8;
    case DType::F4: return 4;
    case DType::Unknown: break;
  }
  return 0;
}

std::size_t dtype_size(DType t) noexcept {
  const int bits = dtype_bits(t);
  return bits % 8 == 0 ? static_cast<std::size_t>(bits / 8) : 0;
}

bool is_fp8_or_fp4(DType t) noexcept {
  return t == DType::F8_E4M3 || t == DType::F8_E5M2 || t == DType::F8_E8M0 || t == DType::F4;
}

float bf16_to_f32(std::uint16_t bits) noexcept {
  // bf16 is the top half of an fp32, so widening is a shift.
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

float f16_to_f32(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  std::uint32_t exp = (bits >> 10) & 0x1Fu;
  std::uint32_t mant = bits & 0x3FFu;
  if (exp == 0x1F)  // inf / NaN: keep the payload bits
    return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);  // +-0
    // Subnormal f16 is normal in fp32: shift the mantissa up until the implicit bit appears,
    // lowering the exponent once per shift.
    exp = 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    mant &= 0x3FFu;
  }
  // Rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

std::uint16_t f32_to_f16(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)  // NaN: set the quiet bit, keep the top of the payload
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  if (magnitude >= 0x477FF000u)  // >= 65520 = 65504 + half an ulp: rounds (ties to even) to inf
    return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (magnitude >= 0x38800000u) {  // >= 2^-14: normal in fp16
    // Rebias the exponent from 127 to 15; the 13 dropped mantissa bits round to nearest even, and a
    // carry out of the mantissa correctly bumps the exponent.
    const std::uint32_t rebiased = magnitude - (112u << 23);
    const std::uint32_t rounded = rebiased + 0xFFFu + ((rebiased >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
  }
  // Subnormal in fp16: the result is value / 2^-24 rounded to an integer (1024 = the smallest normal,
  // whose bit pattern follows on). value = significand * 2^(exponent - 150), so the integer is
  // significand >> (126 - exponent); at 25 and more bits of shift the value is below 2^-25 and rounds to 0.
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t shift = 126u - exponent;
  if (exponent == 0 || shift >= 25) return sign;
  const std::uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t quotient = significand >> shift, remainder = significand & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  const bool up = remainder > half || (remainder == half && (quotient & 1u) != 0);
  return static_cast<std::uint16_t>(sign | (quotient + (up ? 1u : 0u)));
}

}  // namespace frank
