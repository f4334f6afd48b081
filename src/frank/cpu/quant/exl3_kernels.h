#pragma once
// Per-ISA inner loops behind exl3_gemv.h (internal). Each decodes the trellis tiles of one
// 128-output block straight from the bitstream (no decoded copy is kept) and multiplies them by
// the Hadamard-transformed input. All levels do the same fp32 operations in the same order, so
// their results are equal bit for bit:
//   for each input tile kt (ascending), for each of the block's 8 output tiles:
//     partial[c] = 0; for r = 0..15: partial[c] = partial[c] + u[16kt + r] * q[r][c]   (no FMA)
//     acc[c] = acc[c] + partial[c]
// q is exact (a decoded fp16 value), so only the order of the products and sums matters.
#include <cstdint>

#include "frank/cpu/quant/exl3_matrix.h"

namespace frank::cpu::detail {

inline constexpr int kExl3MaxKernelTokens = 8;
inline constexpr int kExl3TilesPerBlock = 8;  // 128 outputs / 16

// acc[t * 128 + c] += (Q^T u_t) for output c of block `block` (outputs 128 block ..), tokens t < n
// <= 8; u is [n, w.padded_cols()].
#define FRANK_EXL3_KERNEL(isa) \
  void exl3_block_##isa(const float* u, int n, const Exl3Matrix& w, std::int64_t block, float* acc);
FRANK_EXL3_KERNEL(scalar)
FRANK_EXL3_KERNEL(avx2)
FRANK_EXL3_KERNEL(avx512)
#undef FRANK_EXL3_KERNEL

// Gather-free SIMD decoding. Element t + 32m (t < 32, m = 0..7) of a tile lands in column
// m + 8h of row r, where h = (t / 4) mod 2 and r depends on t only (exl3_tile_positions), and its
// 16-bit state starts 32K stream bits (exactly K words) after element t's. So with the tile's
// uint32 words regrouped as lanes[a][m] = words[(a + K m) mod 8K] (a = -1..K), the states of one
// row half (8 consecutive columns) are, in lane m,
//   ((lanes[a][m] << 32 | lanes[a + 1][m]) >> shift) & 0xFFFF
// with a and shift the same for all 8 lanes. In 32-bit lanes with shifts that give 0 for counts
// >= 32 (counts that would be negative wrap to >= 32 and so drop their term):
//   state = (first << shl_first | second >> shr_second | first >> shr_first) & 0xFFFF
inline constexpr int kExl3RegroupedRows = kExl3MaxBits + 2;

// lanes[(a + 1) * 8 + m] = word (a + K m) mod 8K of the tile, for a = -1..K.
inline void exl3_regroup_words(const std::uint16_t* tile, int bits, std::uint32_t* lanes) {
  const int n_words = 8 * bits;
  for (int a = -1; a <= bits; ++a)
    for (int m = 0; m < 8; ++m) {
      const int j = (a + bits * m + n_words) % n_words;
      lanes[(a + 1) * 8 + m] = tile[2 * j] | (static_cast<std::uint32_t>(tile[2 * j + 1]) << 16);
    }
}

struct Exl3RowHalf {
  int first_row;  // a + 1: the regrouped row holding each lane's first word
  std::uint32_t shl_first, shr_second, shr_first;
};

// Tile row r, columns 8h .. 8h + 7.
inline Exl3RowHalf exl3_row_half(int bits, int r, int h) {
  const int t = 8 * ((r % 8) / 2) + 4 * h + (r % 2) + 2 * (r / 8);
  const int start = (t + 1) * bits - 16;              // -15 .. 32K - 16: bits before the tile wrap
  const int a = start >= 0 ? start / 32 : -1;         // floor(start / 32)
  const auto shift = static_cast<std::uint32_t>(48 - (start - 32 * a));  // 17..48
  return {a + 1, 32u - shift, shift, shift - 32u};
}

}  // namespace frank::cpu::detail
