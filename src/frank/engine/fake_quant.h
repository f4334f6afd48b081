#pragma once
// DeepSeek-V4.1's quantisation-aware rounding as transformers bakes it into the forward pass
// (dsv41-model.md §4-5, reference notes W5 and §2.5): values are rounded onto the FP8 or FP4 grid
// with one scale per block and returned dequantised, in fp32, bit for bit as transformers'
// _fake_quant_fp8_block / _fake_quant_fp4_block compute them. A width that is not a multiple of the
// block is left unrounded, as transformers leaves it.
#include <cstdint>

namespace frank::engine {

// 2^ceil(log2(t)) for t > 0, from the fp32 bits as transformers takes it: exponent field - 127, plus
// one when the mantissa is nonzero (so every subnormal t gives 2^-126).
float pow2_ceil(float t);

// The e2m1 code (sign in bit 3) of a value already clamped to [-6, 6]: round to nearest, ties to
// the even code (0.25, 1.25, 2.5, 5 round down; 0.75, 1.75, 3.5 up).
uint8_t e2m1_code(float q);

// Window K=V rows: blocks of `block` values, s = pow2_ceil(fp32(max(amax, 1e-4)) * fp32(1/448)),
// x <- e4m3(clamp(x / s, +-448)) * s.
void fake_quant_fp8_ue8m0(float* x, int64_t n, int block);
// Compressed entries: s = e4m3(max(amax, 6 * 2^-9) / 6), x <- e2m1(clamp(x / s, +-6)) * s.
void fake_quant_fp4_e4m3(float* x, int64_t n, int block);
// Indexer queries and keys: s = pow2_ceil(fp32(max(amax, 6 * 2^-126)) * fp32(1/6)), x <- e2m1(clamp(x / s, +-6)) * s.
void fake_quant_fp4_ue8m0(float* x, int64_t n, int block);

// The three roundings by name (the fake_quant op of the V4.1 forward picks one per use).
enum class FakeQuant { Fp8Ue8m0, Fp4E4m3, Fp4Ue8m0 };
void fake_quant(float* x, int64_t n, FakeQuant grid, int block);

}  // namespace frank::engine
