// The AVX-512 EXL3 kernel (avx512f + avx512bw + avx512vl, as quant_kernels_avx512.cpp): one tile
// row (16 outputs) per zmm, its two halves loaded from the tile's regrouped words and shifted by
// one count per half (exl3_kernels.h; no gathers); the codebooks are integer hashes, widened to fp32 with the bit
// arithmetic below and rounded once to fp16 by vcvtps2ph (round to nearest even), exactly as
// exl3_codebook_value does. Products and sums are separate multiplies and adds in the order
// exl3_kernels.h fixes, so the result equals the scalar kernel's bit for bit.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 intrinsic headers, see quant_kernels_avx512.cpp
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "frank/cpu/quant/exl3_codebook.h"
#include "frank/cpu/quant/exl3_kernels.h"

#define FRANK_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace frank::cpu::detail {
namespace {

// A normal fp16 (in the low 16 bits) as fp32 bits: same sign, exponent rebased from 15 to 127,
// mantissa moved up 13 bits. The 3INST / MCG halves are always normal (their exponent field is
// forced to 12..15 by the mask and xor), so no subnormal or special case arises.
FRANK_AVX512 inline __m512 normal_half_to_float(__m512i h) {
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x8000)), 16);
  const __m512i magnitude = _mm512_add_epi32(_mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x7FFF)), 13),
                                             _mm512_set1_epi32(112 << 23));
  return _mm512_castsi512_ps(_mm512_or_si512(sign, magnitude));
}

FRANK_AVX512 inline __m512 round_through_half(__m512 v) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// The decoded weights of 16 states (exl3_codebook.cpp gives the math).
FRANK_AVX512 inline __m512 codebook_values(__m512i state, Exl3Codebook codebook) {
  if (codebook == Exl3Codebook::Mul1) {
    const __m512i y = _mm512_mullo_epi32(state, _mm512_set1_epi32(static_cast<int>(kExl3Mul1Multiplier)));
    const __m512i byte = _mm512_set1_epi32(0xFF);
    __m512i sum = _mm512_and_si512(y, byte);
    sum = _mm512_add_epi32(sum, _mm512_and_si512(_mm512_srli_epi32(y, 8), byte));
    sum = _mm512_add_epi32(sum, _mm512_and_si512(_mm512_srli_epi32(y, 16), byte));
    sum = _mm512_add_epi32(sum, _mm512_srli_epi32(y, 24));
    const __m512 scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(sum, _mm512_set1_epi32(1024))),
                                        _mm512_set1_ps(kExl3Mul1Inv));
    return round_through_half(_mm512_add_ps(scaled, _mm512_set1_ps(kExl3Mul1Bias)));
  }
  __m512i y = _mm512_mullo_epi32(state, _mm512_set1_epi32(static_cast<int>(
                                            codebook == Exl3Codebook::Mcg ? kExl3McgMultiplier : kExl3ThreeInstMultiplier)));
  if (codebook == Exl3Codebook::ThreeInst) y = _mm512_add_epi32(y, _mm512_set1_epi32(static_cast<int>(kExl3ThreeInstIncrement)));
  y = _mm512_xor_si512(_mm512_and_si512(y, _mm512_set1_epi32(static_cast<int>(0x8FFF8FFFu))),
                       _mm512_set1_epi32(0x3B603B60));
  const __m512 low = normal_half_to_float(_mm512_and_si512(y, _mm512_set1_epi32(0xFFFF)));
  const __m512 high = normal_half_to_float(_mm512_srli_epi32(y, 16));
  return round_through_half(_mm512_add_ps(low, high));
}

// One tile row's sources: the two halves' first-word rows and the shift counts, per lane.
struct RowSources {
  int first_row[2];
  alignas(64) std::uint32_t shl_first[16], shr_second[16], shr_first[16];
};

FRANK_AVX512 inline __m512i load16(const std::uint32_t* p) { return _mm512_loadu_si512(p); }

FRANK_AVX512 inline __m512i two_halves(const std::uint32_t* lanes, const RowSources& src, int offset) {
  const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes + (src.first_row[0] + offset) * 8));
  const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes + (src.first_row[1] + offset) * 8));
  return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

}  // namespace

FRANK_AVX512 void exl3_block_avx512(const float* u, int n, const Exl3Matrix& w, std::int64_t block, float* acc) {
  const Exl3Trellis& tr = w.trellis;
  const std::int64_t cols = w.padded_cols();
  RowSources rows[kExl3TileSide];
  for (int r = 0; r < kExl3TileSide; ++r)
    for (int h = 0; h < 2; ++h) {
      const Exl3RowHalf d = exl3_row_half(tr.bits, r, h);
      rows[r].first_row[h] = d.first_row;
      for (int m = 0; m < 8; ++m) {
        rows[r].shl_first[8 * h + m] = d.shl_first;
        rows[r].shr_second[8 * h + m] = d.shr_second;
        rows[r].shr_first[8 * h + m] = d.shr_first;
      }
    }
  alignas(64) std::uint32_t lanes[kExl3RegroupedRows * 8];
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  for (std::int64_t kt = 0; kt < tr.tiles_k; ++kt)
    for (int j = 0; j < kExl3TilesPerBlock; ++j) {
      const std::int64_t nt = block * kExl3TilesPerBlock + j;
      exl3_regroup_words(tr.words + (kt * tr.tiles_n + nt) * tr.words_per_tile(), tr.bits, lanes);
      __m512 partial[kExl3MaxKernelTokens];
      for (int t = 0; t < n; ++t) partial[t] = _mm512_setzero_ps();
      for (int r = 0; r < kExl3TileSide; ++r) {
        const RowSources& src = rows[r];
        const __m512i first = two_halves(lanes, src, 0), second = two_halves(lanes, src, 1);
        __m512i state = _mm512_or_si512(_mm512_sllv_epi32(first, load16(src.shl_first)),
                                        _mm512_srlv_epi32(second, load16(src.shr_second)));
        state = _mm512_and_si512(_mm512_or_si512(state, _mm512_srlv_epi32(first, load16(src.shr_first))), low16);
        const __m512 q = codebook_values(state, tr.codebook);
        for (int t = 0; t < n; ++t)
          partial[t] = _mm512_add_ps(partial[t], _mm512_mul_ps(_mm512_set1_ps(u[t * cols + kt * kExl3TileSide + r]), q));
      }
      for (int t = 0; t < n; ++t) {
        float* at = acc + t * 128 + j * kExl3TileSide;
        _mm512_storeu_ps(at, _mm512_add_ps(_mm512_loadu_ps(at), partial[t]));
      }
    }
}

}  // namespace frank::cpu::detail
