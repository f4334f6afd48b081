// The AVX2 EXL3 kernel (avx2 + fma + f16c, as quant_kernels_avx2.cpp): exl3_kernels_avx512.cpp
// with each 16-output tile row as two ymm halves, each decoded from the regrouped tile words with
// uniform shifts (exl3_kernels.h). Same operations in the same order per output, so the result
// equals the scalar kernel's bit for bit.
#include <immintrin.h>

#include "frank/cpu/quant/exl3_codebook.h"
#include "frank/cpu/quant/exl3_kernels.h"

#define FRANK_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace frank::cpu::detail {
namespace {

// A normal fp16 in the low 16 bits as fp32 (see exl3_kernels_avx512.cpp).
FRANK_AVX2 inline __m256 normal_half_to_float(__m256i h) {
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
  const __m256i magnitude = _mm256_add_epi32(_mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7FFF)), 13),
                                             _mm256_set1_epi32(112 << 23));
  return _mm256_castsi256_ps(_mm256_or_si256(sign, magnitude));
}

FRANK_AVX2 inline __m256 round_through_half(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

FRANK_AVX2 inline __m256 codebook_values(__m256i state, Exl3Codebook codebook) {
  if (codebook == Exl3Codebook::Mul1) {
    const __m256i y = _mm256_mullo_epi32(state, _mm256_set1_epi32(static_cast<int>(kExl3Mul1Multiplier)));
    const __m256i byte = _mm256_set1_epi32(0xFF);
    __m256i sum = _mm256_and_si256(y, byte);
    sum = _mm256_add_epi32(sum, _mm256_and_si256(_mm256_srli_epi32(y, 8), byte));
    sum = _mm256_add_epi32(sum, _mm256_and_si256(_mm256_srli_epi32(y, 16), byte));
    sum = _mm256_add_epi32(sum, _mm256_srli_epi32(y, 24));
    const __m256 scaled = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(sum, _mm256_set1_epi32(1024))),
                                        _mm256_set1_ps(kExl3Mul1Inv));
    return round_through_half(_mm256_add_ps(scaled, _mm256_set1_ps(kExl3Mul1Bias)));
  }
  __m256i y = _mm256_mullo_epi32(state, _mm256_set1_epi32(static_cast<int>(
                                            codebook == Exl3Codebook::Mcg ? kExl3McgMultiplier : kExl3ThreeInstMultiplier)));
  if (codebook == Exl3Codebook::ThreeInst)
    y = _mm256_add_epi32(y, _mm256_set1_epi32(static_cast<int>(kExl3ThreeInstIncrement)));
  y = _mm256_xor_si256(_mm256_and_si256(y, _mm256_set1_epi32(static_cast<int>(0x8FFF8FFFu))),
                       _mm256_set1_epi32(0x3B603B60));
  const __m256 low = normal_half_to_float(_mm256_and_si256(y, _mm256_set1_epi32(0xFFFF)));
  const __m256 high = normal_half_to_float(_mm256_srli_epi32(y, 16));
  return round_through_half(_mm256_add_ps(low, high));
}

FRANK_AVX2 inline __m256i load8(const std::uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

FRANK_AVX2 inline __m128i count(std::uint32_t c) { return _mm_cvtsi64_si128(static_cast<long long>(c)); }

// The decoded weights of one row half (exl3_kernels.h: regrouped words, uniform shifts).
FRANK_AVX2 inline __m256 decode8(const std::uint32_t* lanes, const Exl3RowHalf& d, Exl3Codebook codebook) {
  const __m256i first = load8(lanes + d.first_row * 8), second = load8(lanes + (d.first_row + 1) * 8);
  __m256i state = _mm256_or_si256(_mm256_sll_epi32(first, count(d.shl_first)), _mm256_srl_epi32(second, count(d.shr_second)));
  state = _mm256_or_si256(state, _mm256_srl_epi32(first, count(d.shr_first)));
  return codebook_values(_mm256_and_si256(state, _mm256_set1_epi32(0xFFFF)), codebook);
}

}  // namespace

FRANK_AVX2 void exl3_block_avx2(const float* u, int n, const Exl3Matrix& w, std::int64_t block, float* acc) {
  const Exl3Trellis& tr = w.trellis;
  const std::int64_t cols = w.padded_cols();
  Exl3RowHalf halves[kExl3TileSide][2];
  for (int r = 0; r < kExl3TileSide; ++r)
    for (int h = 0; h < 2; ++h) halves[r][h] = exl3_row_half(tr.bits, r, h);
  alignas(32) std::uint32_t lanes[kExl3RegroupedRows * 8];
  for (std::int64_t kt = 0; kt < tr.tiles_k; ++kt)
    for (int j = 0; j < kExl3TilesPerBlock; ++j) {
      const std::int64_t nt = block * kExl3TilesPerBlock + j;
      exl3_regroup_words(tr.words + (kt * tr.tiles_n + nt) * tr.words_per_tile(), tr.bits, lanes);
      __m256 partial[kExl3MaxKernelTokens][2];
      for (int t = 0; t < n; ++t) partial[t][0] = partial[t][1] = _mm256_setzero_ps();
      for (int r = 0; r < kExl3TileSide; ++r) {
        const __m256 q0 = decode8(lanes, halves[r][0], tr.codebook);
        const __m256 q1 = decode8(lanes, halves[r][1], tr.codebook);
        for (int t = 0; t < n; ++t) {
          const __m256 x = _mm256_set1_ps(u[t * cols + kt * kExl3TileSide + r]);
          partial[t][0] = _mm256_add_ps(partial[t][0], _mm256_mul_ps(x, q0));
          partial[t][1] = _mm256_add_ps(partial[t][1], _mm256_mul_ps(x, q1));
        }
      }
      for (int t = 0; t < n; ++t) {
        float* at = acc + t * 128 + j * kExl3TileSide;
        _mm256_storeu_ps(at, _mm256_add_ps(_mm256_loadu_ps(at), partial[t][0]));
        _mm256_storeu_ps(at + 8, _mm256_add_ps(_mm256_loadu_ps(at + 8), partial[t][1]));
      }
    }
}

}  // namespace frank::cpu::detail
