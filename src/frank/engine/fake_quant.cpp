#include "frank/engine/fake_quant.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "frank/cpu/quant/quant_formats.h"
#include "frank/engine/kv_record.h"

namespace frank::engine {
namespace {

constexpr float kFp8Max = 448.0f;
constexpr float kFp4Max = 6.0f;

float block_amax(const float* x, int block) {
  float amax = 0.0f;
  for (int i = 0; i < block; ++i) amax = std::max(amax, std::abs(x[i]));
  return amax;
}

// x <- e2m1(clamp(x / s, +-6)) * s over one block.
void round_fp4_block(float* x, int block, float scale) {
  for (int i = 0; i < block; ++i) {
    const float q = std::clamp(x[i] / scale, -kFp4Max, kFp4Max);
    const uint8_t code = e2m1_code(q);
    // transformers' value table holds +0 for the negative-zero code (e2m1 itself would give -0).
    x[i] = code == 0x8 ? 0.0f : cpu::e2m1_value(code) * scale;
  }
}

template <class Block>
void for_each_block(float* x, int64_t n, int block, Block&& f) {
  if (block <= 0 || n % block != 0) return;  // transformers leaves such widths unrounded
  for (int64_t b = 0; b < n; b += block) f(x + b);
}

}  // namespace

float pow2_ceil(float t) {
  const uint32_t bits = std::bit_cast<uint32_t>(t);
  const int exponent = static_cast<int>((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0 ? 1 : 0);
  return std::exp2(static_cast<float>(exponent));
}

uint8_t e2m1_code(float q) {
  // The code is the number of thresholds |q| reaches. At a tie the threshold is the boundary itself
  // when the upper code is even (ties up), its next float up when the lower code is even (ties down).
  static const float kThresholds[7] = {std::nextafter(0.25f, INFINITY), 0.75f, std::nextafter(1.25f, INFINITY), 1.75f,
                                       std::nextafter(2.5f, INFINITY),  3.5f,  std::nextafter(5.0f, INFINITY)};
  const float magnitude = std::abs(q);
  uint8_t code = 0;
  for (float t : kThresholds) code += magnitude >= t ? 1 : 0;
  return static_cast<uint8_t>(code | (std::signbit(q) ? 0x8 : 0));
}

void fake_quant_fp8_ue8m0(float* x, int64_t n, int block) {
  for_each_block(x, n, block, [&](float* b) {
    const float amax = std::max(block_amax(b, block), 1e-4f);
    const float scale = pow2_ceil(amax * static_cast<float>(1.0 / kFp8Max));
    for (int i = 0; i < block; ++i) {
      const float q = std::clamp(b[i] / scale, -kFp8Max, kFp8Max);
      b[i] = cpu::e4m3_value(float_to_e4m3_saturating(q)) * scale;
    }
  });
}

void fake_quant_fp4_e4m3(float* x, int64_t n, int block) {
  for_each_block(x, n, block, [&](float* b) {
    // transformers casts this scale to e4m3 without saturating; amax would need to pass 2880 for
    // that to matter (a NaN in torch, 448 here).
    const float scale =
        cpu::e4m3_value(float_to_e4m3_saturating(std::max(block_amax(b, block), 6.0f * 0x1p-9f) / kFp4Max));
    round_fp4_block(b, block, scale);
  });
}

void fake_quant_fp4_ue8m0(float* x, int64_t n, int block) {
  for_each_block(x, n, block, [&](float* b) {
    const float amax = std::max(block_amax(b, block), 6.0f * 0x1p-126f);
    round_fp4_block(b, block, pow2_ceil(amax * static_cast<float>(1.0 / kFp4Max)));
  });
}

void fake_quant(float* x, int64_t n, FakeQuant grid, int block) {
  switch (grid) {
    case FakeQuant::Fp8Ue8m0:
      return fake_quant_fp8_ue8m0(x, n, block);
    case FakeQuant::Fp4E4m3:
      return fake_quant_fp4_e4m3(x, n, block);
    case FakeQuant::Fp4Ue8m0:
      return fake_quant_fp4_ue8m0(x, n, block);
  }
}

}  // namespace frank::engine
