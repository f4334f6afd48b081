#pragma once
// Per-ISA inner loops behind exl3_gemv.h (internal). Each decodes the trellis tiles of one
// 128-output block straight from the bitstream (no decoded copy is kept) and multiplies them by
// the Hadamard-transformed input. All levels do the same fp32 operations in the same order, so
// their results are equal bit for bit:
//   for each input tile kt (ascending), for each of the block's 8 output tiles:
//     partial[c] = 0; for r = 0..15: partial[c] = partial[c] + u[16kt + r] * q[r][c]   (no FMA)
//     acc[c] = acc[c] + partial[c]
// q is exact (a decoded fp16 value), so only the order of the products and sums matters.
#include <array>
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

// Where the state of each tile position comes from, for SIMD decoding in row-major order. Position
// p = 16 r + c holds bitstream element t (exl3_tile_positions), whose 16-bit state is
// ((words[first] << 32 | words[second]) >> shift) & 0xFFFF over the tile's uint32 words. In 32-bit
// lanes with variable shifts that give 0 for counts >= 32 (vpsllvd / vpsrlvd):
//   state = (words[first] << shl_first | words[second] >> shr_second | words[first] >> shr_first) & 0xFFFF
// where the counts that would be negative wrap to >= 32 and so drop their term.
struct Exl3StateSources {
  std::array<std::int32_t, 256> first, second;
  std::array<std::uint32_t, 256> shl_first, shr_second, shr_first;
};
const Exl3StateSources& exl3_state_sources(int bits);  // bits 1..8

}  // namespace frank::cpu::detail
