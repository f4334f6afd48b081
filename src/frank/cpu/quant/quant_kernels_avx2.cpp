// AVX2 kernels (avx2 + fma + f16c), the fallback for CPUs without AVX-512. Same decoding as
// quant_kernels_avx512.cpp (see there), 8 lanes wide: e4m3 through the fp16 layout and vcvtph2ps;
// e2m1 through an 8-entry magnitude table (_mm256_permutevar8x32_ps reads the low 3 bits of the
// nibble) with the nibble's top bit xor-ed in as the sign. Every function carries the target
// attribute, so nothing here runs unless cpu_supports(CpuKernels::Avx2).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC PR 105593: see quant_kernels_avx512.cpp
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <vector>

#include "frank/cpu/quant/quant_kernels.h"

#define FRANK_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace frank::cpu::detail {
namespace {

constexpr float kE4m3HalfUnscale = 256.0f;  // undoes the 2^-8 of the fp16 decode
constexpr int kFp8Step = 16;                 // columns per step: one 16-byte load

// With 16 ymm registers, 8 tokens get one accumulator each; fewer tokens get two, so that the
// FMA latency is still covered by independent chains.
template <int NT>
constexpr int kChains = NT >= 4 ? 1 : 2;

// 16 e4m3 bytes -> 16 fp16 bit patterns worth e4m3 * 2^-8 (see e4m3_to_half_bits for AVX-512).
FRANK_AVX2 inline __m256i e4m3_to_half_bits(__m128i bytes) {
  const __m256i shifted = _mm256_slli_epi16(_mm256_cvtepi8_epi16(bytes), 7);
  return _mm256_and_si256(shifted, _mm256_set1_epi16(static_cast<int16_t>(0xBF80)));
}

// Adds 16 columns starting at `bytes` / x[t * x_stride] into acc.
template <int NT>
FRANK_AVX2 inline void fp8_step(const uint8_t* bytes, const float* x, int64_t x_stride, float scale,
                                __m256 (&acc)[NT][kChains<NT>]) {
  const __m128i e4m3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
  const __m256i half = e4m3_to_half_bits(e4m3);
  const __m256 scale8 = _mm256_set1_ps(scale);
  __m256 w0 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(half)), scale8);
  __m256 w1 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(half, 1)), scale8);
  // NaN bytes are those with all 7 exponent and mantissa bits set.
  const __m128i magnitude_bits = _mm_set1_epi8(0x7F);
  const __m128i nans = _mm_cmpeq_epi8(_mm_and_si128(e4m3, magnitude_bits), magnitude_bits);
  if (_mm_movemask_epi8(nans) != 0) [[unlikely]] {
    const __m256 nan = _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN());
    w0 = _mm256_blendv_ps(w0, nan, _mm256_castsi256_ps(_mm256_cvtepi8_epi32(nans)));
    w1 = _mm256_blendv_ps(w1, nan, _mm256_castsi256_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(nans, 8))));
  }
  #pragma GCC unroll 8  // keeps acc[][] in registers: -O2 alone leaves it on the stack
  for (int t = 0; t < NT; ++t) {
    const float* xt = x + t * x_stride;
    acc[t][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt), acc[t][0]);
    acc[t][kChains<NT> - 1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xt + 8), acc[t][kChains<NT> - 1]);
  }
}

FRANK_AVX2 inline float sum_lanes(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

template <int NT>
FRANK_AVX2 void fp8_rows(const float* x, const Fp8BlockMatrix& w, float* y, int64_t row_begin,
                         int64_t row_end) {
  const float* ue8m0 = ue8m0_table();
  for (int64_t i = row_begin; i < row_end; ++i) {
    const uint8_t* row = w.weight + i * w.cols;
    const uint8_t* row_scales = w.scales + (i / w.block) * w.scale_cols();
    __m256 acc[NT][kChains<NT>];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t)
      for (int c = 0; c < kChains<NT>; ++c) acc[t][c] = _mm256_setzero_ps();
    // Block by block (32 or 128 columns, a multiple of the 16-column step), then 16 columns at a time.
    for (int64_t block_begin = 0, b = 0; block_begin < w.cols; block_begin += w.block, ++b) {
      const float scale = ue8m0[row_scales[b]];
      const int64_t block_end = std::min(block_begin + w.block, w.cols);
      int64_t j = block_begin;
      for (; j + kFp8Step <= block_end; j += kFp8Step) fp8_step<NT>(row + j, x + j, w.cols, scale, acc);
      if (j < block_end) {  // the row's last cols % 16 columns, zero-padded
        const auto left = static_cast<size_t>(block_end - j);
        alignas(32) uint8_t bytes[kFp8Step] = {};
        alignas(32) float xs[NT][kFp8Step] = {};
        std::memcpy(bytes, row + j, left);
        for (int t = 0; t < NT; ++t) std::memcpy(xs[t], x + t * w.cols + j, left * sizeof(float));
        fp8_step<NT>(bytes, xs[0], kFp8Step, scale, acc);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      __m256 total = acc[t][0];
      for (int c = 1; c < kChains<NT>; ++c) total = _mm256_add_ps(total, acc[t][c]);
      y[t * w.rows + i] = sum_lanes(total) * kE4m3HalfUnscale;
    }
  }
}

// x is deinterleaved (deinterleave_pairs, 8 lanes): per 16 columns the 8 even ones, then the odd.
template <int NT>
FRANK_AVX2 void fp4_rows(const float* x, const Fp4Matrix& w, float* y, int64_t row_begin,
                         int64_t row_end) {
  const float* ue8m0 = ue8m0_table();
  const __m256 magnitudes = _mm256_loadu_ps(e2m1_table());  // entries 0-7: the positive half
  const __m256i sign_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  for (int64_t i = row_begin; i < row_end; ++i) {
    const uint8_t* row = w.packed + i * (w.cols / 2);
    const uint8_t* row_scales = w.scales + i * w.scale_cols();
    __m256 acc[NT][kChains<NT>];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t)
      for (int c = 0; c < kChains<NT>; ++c) acc[t][c] = _mm256_setzero_ps();
    for (int64_t g = 0; g < w.scale_cols(); ++g) {
      const __m256 table = _mm256_mul_ps(magnitudes, _mm256_set1_ps(ue8m0[row_scales[g]]));
      for (int half = 0; half < 2; ++half) {  // 16 columns = 8 bytes each
        const int64_t col = 32 * g + 16 * half;
        const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + col / 2)));
        // Low nibble: magnitude from bits 0-2, sign from bit 3; high nibble: bits 4-6 and bit 7.
        const __m256i even_sign = _mm256_and_si256(_mm256_slli_epi32(bytes, 28), sign_bit);
        const __m256i odd_sign = _mm256_and_si256(_mm256_slli_epi32(bytes, 24), sign_bit);
        const __m256 even = _mm256_xor_ps(_mm256_permutevar8x32_ps(table, bytes), _mm256_castsi256_ps(even_sign));
        const __m256 odd = _mm256_xor_ps(_mm256_permutevar8x32_ps(table, _mm256_srli_epi32(bytes, 4)),
                                         _mm256_castsi256_ps(odd_sign));
        #pragma GCC unroll 8  // keeps acc[][] in registers: -O2 alone leaves it on the stack
        for (int t = 0; t < NT; ++t) {
          const float* xt = x + t * w.cols + col;
          acc[t][0] = _mm256_fmadd_ps(even, _mm256_loadu_ps(xt), acc[t][0]);
          acc[t][kChains<NT> - 1] = _mm256_fmadd_ps(odd, _mm256_loadu_ps(xt + 8), acc[t][kChains<NT> - 1]);
        }
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      __m256 total = acc[t][0];
      for (int c = 1; c < kChains<NT>; ++c) total = _mm256_add_ps(total, acc[t][c]);
      y[t * w.rows + i] = sum_lanes(total);
    }
  }
}

constexpr std::array kFp8Kernels = {fp8_rows<1>, fp8_rows<2>, fp8_rows<3>, fp8_rows<4>,
                                    fp8_rows<5>, fp8_rows<6>, fp8_rows<7>, fp8_rows<8>};
constexpr std::array kFp4Kernels = {fp4_rows<1>, fp4_rows<2>, fp4_rows<3>, fp4_rows<4>,
                                    fp4_rows<5>, fp4_rows<6>, fp4_rows<7>, fp4_rows<8>};
static_assert(kFp8Kernels.size() == kMaxKernelTokens && kFp4Kernels.size() == kMaxKernelTokens);

}  // namespace

void fp8_rows_avx2(const float* x, int n, const Fp8BlockMatrix& w, float* y, int64_t row_begin,
                   int64_t row_end) {
  kFp8Kernels[n - 1](x, w, y, row_begin, row_end);
}

void fp4_rows_avx2(const float* x, int n, const Fp4Matrix& w, float* y, int64_t row_begin,
                   int64_t row_end) {
  std::vector<float> deinterleaved(static_cast<size_t>(n * w.cols));
  deinterleave_pairs(x, n, w.cols, 8, deinterleaved.data());
  kFp4Kernels[n - 1](deinterleaved.data(), w, y, row_begin, row_end);
}

}  // namespace frank::cpu::detail
