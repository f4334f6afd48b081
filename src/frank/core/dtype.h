#pragma once
// Element types as they appear in safetensors headers, plus the exact 16-bit -> fp32 conversions
// the loader needs. Only the types we can name are listed; anything else parses to Unknown so a
// checkpoint with an exotic tensor still opens and only fails when that tensor is actually read.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace frank {

enum class DType {
  F32, F16, BF16, F64,
  I64, I32, I16, I8,
  U8, U16, U32, U64,
  BOOL,
  F8_E4M3, F8_E5M2, F8_E8M0,
  F4,  // 4-bit float (e2m1), packed two per byte
  Unknown,
};

// Parses a safetensors dtype string ("F32", "BF16", "F8_E4M3", ...). Also accepts spellings seen
// in the wild (e.g. "F8_E4M3FN", "F8_E8M0FNU", "F4_E2M1"). Never throws; unknown -> DType::Unknown.
DType parse_dtype(std::string_view s) noexcept;

// Canonical safetensors spelling ("Unknown" for DType::Unknown).
std::string_view dtype_name(DType t) noexcept;

// Bits per element; 0 for Unknown.
int dtype_bits(DType t) noexcept;

// Bytes per element, or 0 when the type has no whole-byte element size (sub-byte or Unknown).
std::size_t dtype_size(DType t) noexcept;

// True for the low-precision float formats (FP8 / FP4) that need dequantization we don't do yet.
bool is_fp8_or_fp4(DType t) noexcept;

// Exact conversions: every 16-bit pattern maps to the fp32 with the same value
// (subnormals, +-0, +-inf and NaN payloads included).
float bf16_to_f32(std::uint16_t bits) noexcept;
float f16_to_f32(std::uint16_t bits) noexcept;

// fp32 -> fp16 bits, rounded to nearest with ties to even (IEEE's default, and CUDA's __float2half_rn):
// subnormal results included, |x| >= 65520 becomes +-inf, NaN stays NaN (quiet, sign kept).
std::uint16_t f32_to_f16(float value) noexcept;

}  // namespace frank
