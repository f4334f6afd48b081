#include "frank/cpu/quant/quant_formats.h"

#include <array>
#include <bit>
#include <limits>

#include <fmt/format.h>

#include "frank/core/error.h"

namespace frank::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The tables are built from the bit layouts at compile time; every value is a small integer
// times a power of two, so building fp32 bits directly is exact.
constexpr float e4m3_from_bits(uint8_t b) {
  const uint32_t sign = (b & 0x80u) << 24, exponent = (b >> 3) & 0xFu, mantissa = b & 0x7u;
  if (exponent == 0xF && mantissa == 0x7) return kNaN;
  float magnitude = 0.0f;
  if (exponent == 0)  // subnormal: m/8 * 2^-6 = m * 2^-9
    magnitude = static_cast<float>(mantissa) * std::bit_cast<float>(uint32_t{(127u - 9u) << 23});
  else                // (1 + m/8) * 2^(e-7): rebias the exponent to fp32's 127
    magnitude = std::bit_cast<float>(((exponent + 120u) << 23) | (mantissa << 20));
  return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
}

constexpr float ue8m0_from_bits(uint8_t b) {
  if (b == 0xFF) return kNaN;
  if (b == 0) return std::bit_cast<float>(uint32_t{1} << 22);  // 2^-127 is an fp32 subnormal
  return std::bit_cast<float>(uint32_t{b} << 23);               // 2^(b-127): exponent field b
}

constexpr std::array<float, 256> make_e4m3_table() {
  std::array<float, 256> t{};
  for (int b = 0; b < 256; ++b) t[b] = e4m3_from_bits(static_cast<uint8_t>(b));
  return t;
}

constexpr std::array<float, 256> make_ue8m0_table() {
  std::array<float, 256> t{};
  for (int b = 0; b < 256; ++b) t[b] = ue8m0_from_bits(static_cast<uint8_t>(b));
  return t;
}

constexpr std::array<float, 256> kE4m3 = make_e4m3_table();
constexpr std::array<float, 256> kUe8m0 = make_ue8m0_table();
constexpr std::array<float, 16> kE2m1 = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                         -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

void check_sizes(const char* what, int64_t rows, int64_t cols, const void* weight, const void* scales) {
  if (rows < 0 || cols < 0) throw Error(fmt::format("{}: negative shape [{}, {}]", what, rows, cols));
  if (rows > 0 && cols > 0 && (weight == nullptr || scales == nullptr))
    throw Error(fmt::format("{}: null weight or scale data for a [{}, {}] matrix", what, rows, cols));
}

}  // namespace

float e4m3_value(uint8_t bits) { return kE4m3[bits]; }
float e2m1_value(uint8_t nibble) { return kE2m1[nibble & 0xF]; }
float ue8m0_value(uint8_t bits) { return kUe8m0[bits]; }

const float* e4m3_table() { return kE4m3.data(); }
const float* e2m1_table() { return kE2m1.data(); }
const float* ue8m0_table() { return kUe8m0.data(); }

void validate(const Fp8BlockMatrix& w) {
  if (w.block != 128 && w.block != 32)
    throw Error(fmt::format("FP8 block matrix: block size {} (expected 128 or 32)", w.block));
  check_sizes("FP8 block matrix", w.rows, w.cols, w.weight, w.scales);
}

void validate(const Fp4Matrix& w) {
  check_sizes("FP4 matrix", w.rows, w.cols, w.packed, w.scales);
  if (w.cols % Fp4Matrix::kGroup != 0)
    throw Error(fmt::format("FP4 matrix: {} columns is not a multiple of {}", w.cols, Fp4Matrix::kGroup));
}

// A power-of-two scale times an exactly representable value is exact unless it leaves fp32's range.
void dequantize(const Fp8BlockMatrix& w, float* out) {
  validate(w);
  for (int64_t i = 0; i < w.rows; ++i)
    for (int64_t j = 0; j < w.cols; ++j)
      out[i * w.cols + j] = kE4m3[w.weight[i * w.cols + j]] *
                            kUe8m0[w.scales[(i / w.block) * w.scale_cols() + j / w.block]];
}

void dequantize(const Fp4Matrix& w, float* out) {
  validate(w);
  for (int64_t i = 0; i < w.rows; ++i)
    for (int64_t j = 0; j < w.cols; ++j) {
      const uint8_t byte = w.packed[i * (w.cols / 2) + j / 2];
      const uint8_t nibble = (j % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      out[i * w.cols + j] = kE2m1[nibble] * kUe8m0[w.scales[i * w.scale_cols() + j / Fp4Matrix::kGroup]];
    }
}

}  // namespace frank::cpu
