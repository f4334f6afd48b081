// AVX-512 kernels (avx512f + avx512bw + avx512vl). Every function that uses the instructions
// carries the target attribute, so this file builds for generic x86-64 and nothing here runs
// unless cpu_supports(CpuKernels::Avx512).
//
// e4m3 decode: an e4m3 byte's exponent and mantissa, placed in the low exponent bits and top
// mantissa bits of an fp16, give that fp16 the e4m3 value times 2^-8 exactly (fp16's bias 15 is
// e4m3's 7 plus 8, and fp16 subnormals line up with e4m3 subnormals); vcvtph2ps then widens 16 at a
// time. That is cheaper than a 256-entry table gather (bench/results/quant-gemv-2026-11-29.md). Only
// the NaN bytes (0x7F, 0xFF) decode wrongly (to +-1.875), so they are patched to NaN. The 2^-8 is
// undone once per output (exact), so every product is the true W_ij * x_j times 2^-8.
//
// e2m1 decode: _mm512_permutexvar_ps over the 16-entry table, pre-multiplied by the group's scale
// (a power of two: exact), so the scale costs one multiply per 32 weights.
// GCC 12's intrinsic headers self-initialise their "undefined" vectors (`__m512 __Y = __Y;`), which
// -Wmaybe-uninitialized reports once they are inlined into target-attribute functions (GCC PR 105593,
// fixed in GCC 13). The warnings point into the header, so silencing them there is enough.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "frank/cpu/quant/quant_kernels.h"

#define FRANK_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace frank::cpu::detail {
namespace {

constexpr float kE4m3HalfUnscale = 256.0f;  // undoes the 2^-8 of the fp16 decode

// 32 e4m3 bytes -> 32 fp16 bit patterns worth e4m3 * 2^-8. Sign-extending the byte to 16 bits and
// shifting left by 7 puts the sign at bit 15 and exponent:mantissa at bits 13..7; bit 14 (a copy of
// the sign) must be cleared.
FRANK_AVX512 inline __m512i e4m3_to_half_bits(__m256i bytes) {
  const __m512i shifted = _mm512_slli_epi16(_mm512_cvtepi8_epi16(bytes), 7);
  return _mm512_and_si512(shifted, _mm512_set1_epi16(static_cast<int16_t>(0xBF80)));
}

// Adds 32 columns (fewer where `mask` says so) into acc; `scale` is their block's ue8m0 value.
template <int NT>
FRANK_AVX512 inline void fp8_step(const uint8_t* bytes, const float* x, int64_t x_stride, __mmask32 mask,
                                  float scale, __m512 (&acc)[NT][2]) {
  const __m256i e4m3 = _mm256_maskz_loadu_epi8(mask, bytes);
  const __m512i half = e4m3_to_half_bits(e4m3);
  const __m512 scale16 = _mm512_set1_ps(scale);
  __m512 w0 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(half)), scale16);
  __m512 w1 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(half, 1)), scale16);
  // NaN bytes are those with all 7 exponent and mantissa bits set (tested on the 256-bit bytes:
  // cheaper than on the 512-bit halves).
  const __m256i magnitude_bits = _mm256_set1_epi8(0x7F);
  const __mmask32 nans = _mm256_cmpeq_epi8_mask(_mm256_and_si256(e4m3, magnitude_bits), magnitude_bits);
  if (nans != 0) [[unlikely]] {
    const __m512 nan = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
    w0 = _mm512_mask_mov_ps(w0, static_cast<__mmask16>(nans), nan);
    w1 = _mm512_mask_mov_ps(w1, static_cast<__mmask16>(nans >> 16), nan);
  }
  const auto mask0 = static_cast<__mmask16>(mask), mask1 = static_cast<__mmask16>(mask >> 16);
#pragma GCC unroll 8  // keeps acc[][] in registers: -O2 alone leaves it on the stack
  for (int t = 0; t < NT; ++t) {
    const float* xt = x + t * x_stride;
    acc[t][0] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(mask0, xt), acc[t][0]);
    acc[t][1] = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(mask1, xt + 16), acc[t][1]);
  }
}

template <int NT>
FRANK_AVX512 void fp8_rows(const float* x, const Fp8BlockMatrix& w, float* y, int64_t row_begin,
                           int64_t row_end) {
  const float* ue8m0 = ue8m0_table();
  for (int64_t i = row_begin; i < row_end; ++i) {
    const uint8_t* row = w.weight + i * w.cols;
    const uint8_t* row_scales = w.scales + (i / w.block) * w.scale_cols();
    __m512 acc[NT][2];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    // Block by block (32 or 128 columns, a multiple of the 32-column step), then 32 columns at a time.
    for (int64_t block_begin = 0, b = 0; block_begin < w.cols; block_begin += w.block, ++b) {
      const float scale = ue8m0[row_scales[b]];
      const int64_t block_end = std::min(block_begin + w.block, w.cols);
      for (int64_t j = block_begin; j < block_end; j += 32) {
        const int64_t left = block_end - j;
        const __mmask32 mask = left >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << left) - 1);
        fp8_step<NT>(row + j, x + j, w.cols, mask, scale, acc);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t)
      y[t * w.rows + i] = _mm512_reduce_add_ps(_mm512_add_ps(acc[t][0], acc[t][1])) * kE4m3HalfUnscale;
  }
}

// x is deinterleaved (deinterleave_pairs, 16 lanes): per 32 columns the 16 even ones, then the odd.
template <int NT>
FRANK_AVX512 void fp4_rows(const float* x, const Fp4Matrix& w, float* y, int64_t row_begin,
                           int64_t row_end) {
  const float* ue8m0 = ue8m0_table();
  const __m512 e2m1 = _mm512_loadu_ps(e2m1_table());
  for (int64_t i = row_begin; i < row_end; ++i) {
    const uint8_t* row = w.packed + i * (w.cols / 2);
    const uint8_t* row_scales = w.scales + i * w.scale_cols();
    __m512 acc[NT][2];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    for (int64_t g = 0; g < w.scale_cols(); ++g) {
      const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * g)));
      const __m512 table = _mm512_mul_ps(e2m1, _mm512_set1_ps(ue8m0[row_scales[g]]));
      const __m512 even = _mm512_permutexvar_ps(bytes, table);  // uses the low 4 bits of each index
      const __m512 odd = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
      #pragma GCC unroll 8  // keeps acc[][] in registers: -O2 alone leaves it on the stack
      for (int t = 0; t < NT; ++t) {
        const float* xt = x + t * w.cols + 32 * g;
        acc[t][0] = _mm512_fmadd_ps(even, _mm512_loadu_ps(xt), acc[t][0]);
        acc[t][1] = _mm512_fmadd_ps(odd, _mm512_loadu_ps(xt + 16), acc[t][1]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) y[t * w.rows + i] = _mm512_reduce_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]));
  }
}

constexpr std::array kFp8Kernels = {fp8_rows<1>, fp8_rows<2>, fp8_rows<3>, fp8_rows<4>,
                                    fp8_rows<5>, fp8_rows<6>, fp8_rows<7>, fp8_rows<8>};
constexpr std::array kFp4Kernels = {fp4_rows<1>, fp4_rows<2>, fp4_rows<3>, fp4_rows<4>,
                                    fp4_rows<5>, fp4_rows<6>, fp4_rows<7>, fp4_rows<8>};
static_assert(kFp8Kernels.size() == kMaxKernelTokens && kFp4Kernels.size() == kMaxKernelTokens);

}  // namespace

void fp8_rows_avx512(const float* x, int n, const Fp8BlockMatrix& w, float* y, int64_t row_begin,
                     int64_t row_end) {
  kFp8Kernels[n - 1](x, w, y, row_begin, row_end);
}

void fp4_rows_avx512(const float* x, int n, const Fp4Matrix& w, float* y, int64_t row_begin,
                     int64_t row_end) {
  std::vector<float> deinterleaved(static_cast<size_t>(n * w.cols));
  deinterleave_pairs(x, n, w.cols, 16, deinterleaved.data());
  kFp4Kernels[n - 1](deinterleaved.data(), w, y, row_begin, row_end);
}

}  // namespace frank::cpu::detail
