#pragma once
// Bit-level decoders of packed e4m3 / e2m1 weights into fp16 pairs, for the GPU's FP8 / FP4 GEMV
// (dense_ops.cu). Integer operations only (shifts and masks: 3.5 a pair for e4m3, 3.75 for e2m1),
// so a kernel decodes 16 bytes of weights with no table and no conversion unit; plain constexpr
// C++ as well, so the CPU tests check every code against cpu::e4m3_value / e2m1_value.
//
// A pair is a 32-bit word of two IEEE fp16: the low half and the high half. Each decoded value is
// the format's value times a fixed power of two (it lands in fp16 with no rounding), which the
// kernel folds into the block scale it multiplies by anyway:
//   e4m3 [s eeee mmm] -> fp16 [s 0eeee mmm0000000]  = e4m3 value * 2^-8
//        (normal: 2^(e-15)(1 + m/8) = 2^(e-7)(1 + m/8) * 2^-8; e = 0: both subnormal, m * 2^-17)
//   e2m1 [s ee m]     -> fp16 [s 000ee m000000000]  = e2m1 value * 2^-14
//        (normal: 2^(e-15)(1 + m/2) = 2^(e-1)(1 + m/2) * 2^-14; e = 0: m * 2^-15 = m/2 * 2^-14)
// The NaN codes of e4m3fn (0x7F, 0xFF) decode to +-480 (their bits read as a finite value); the
// checkpoints' quantisers saturate, so no shipped weight holds them.
#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define FRANK_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FRANK_HOST_DEVICE inline
#endif

namespace frank::cuda {

// The kernels' element types for the official formats (beside float and bf16 bits).
struct Fp8 {};
struct Fp4 {};

constexpr int kE4m3Fp16Shift = 8;   // fp16 pair value = e4m3 * 2^-8
constexpr int kE2m1Fp16Shift = 14;  // fp16 pair value = e2m1 * 2^-14

// e4m3 bytes 0 (low half) and 2 (high half) of `w`: sign bit 7 -> 15, exponent and mantissa
// bits 0-6 -> 7-13.
FRANK_HOST_DEVICE constexpr uint32_t e4m3_pair_02(uint32_t w) {
  return ((w << 8) & 0x80008000u) | ((w << 7) & 0x3f803f80u);
}

// e4m3 bytes 1 (low half) and 3 (high half): their sign bits are already bits 15 and 31.
FRANK_HOST_DEVICE constexpr uint32_t e4m3_pair_13(uint32_t w) {
  return (w & 0x80008000u) | ((w >> 1) & 0x3f803f80u);
}

// e2m1 nibbles J (low half) and J + 4 (high half) of `w` (J < 4): sign bit 4J+3 -> 15, exponent and
// mantissa bits 4J..4J+2 -> 9..11.
template <int J>
FRANK_HOST_DEVICE constexpr uint32_t e2m1_pair(uint32_t w) {
  static_assert(J >= 0 && J < 4, "a word holds nibbles 0..7: pairs J and J + 4");
  const uint32_t sign = (w << (12 - 4 * J)) & 0x80008000u;
  if constexpr (J < 3)
    return sign | ((w << (9 - 4 * J)) & 0x0e000e00u);
  else
    return sign | ((w >> 3) & 0x0e000e00u);
}

#if defined(__CUDACC__)
// The two fp16 of a decoded pair as fp32 (exact: every fp16, subnormals too, is an fp32).
__device__ __forceinline__ float2 fp16_pair_to_float2(uint32_t bits) {
  __half2_raw raw;
  raw.x = static_cast<unsigned short>(bits & 0xffffu);
  raw.y = static_cast<unsigned short>(bits >> 16);
  return __half22float2(__half2(raw));
}

// 2^(s - 127 + fp16_shift) for the ue8m0 scale byte s: the block scale times the power of two the
// fp16 decoding divided by. Exponent field s + fp16_shift, clamped to 255 (inf) where the product
// leaves fp32 (s >= 247 for e4m3, >= 241 for e2m1: no checkpoint's scale).
__device__ __forceinline__ float block_scale_factor(uint32_t s, uint32_t fp16_shift) {
  return __uint_as_float(min(s + fp16_shift, 255u) << 23);
}
#endif

}  // namespace frank::cuda
