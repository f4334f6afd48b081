#pragma once
// The three ExLlamaV3 (EXL3) codebooks: a 16-bit trellis state -> one fp16 weight, computed (no
// stored table). Bit-exact with ExLlamaV3's CUDA decode (`ext/quant/codebook.cuh`); the math and
// the rounding argument are in docs/exl3-format.md §2 (shared docs).
#include <cstdint>
#include <string_view>

#include "frank/core/linear_weight.h"  // Exl3Codebook: only the marker's presence counts, never its value

namespace frank::cpu {

// The codebooks' constants (locked upstream on 2025-10-12), shared with the SIMD kernels. 3INST:
// hash x * 89226354 + 64248484; MCG: x * 0xCBAC1FED; MUL1: byte sum of x * 0x83DCD12D, then
// fma(1024 + sum, k_inv, k_bias) with k_inv = fp16 0x1EEE = 1774 * 2^-18, k_bias = fp16 0xC931 =
// -1329 * 2^-7 (both exact in fp32).
inline constexpr std::uint32_t kExl3ThreeInstMultiplier = 89226354u, kExl3ThreeInstIncrement = 64248484u;
inline constexpr std::uint32_t kExl3McgMultiplier = 0xCBAC1FEDu, kExl3Mul1Multiplier = 0x83DCD12Du;
inline constexpr float kExl3Mul1Inv = 1774.0f / 262144.0f, kExl3Mul1Bias = -1329.0f / 128.0f;

std::string_view exl3_codebook_name(Exl3Codebook codebook);  // "3inst", "mcg", "mul1"

// fp16 bits of the weight that `state` decodes to.
std::uint16_t exl3_codebook_value(Exl3Codebook codebook, std::uint16_t state);

}  // namespace frank::cpu
