#pragma once
// Decoding EXL3 trellis tiles on the device (cpu/quant/exl3_trellis.h, exl3_codebook.h): a state
// per element, then its codebook value. Two decoders of one tile layout: position_state and
// codebook_value, any element by its (row, column) (exl3_decode), and LaneStates with
// fast_codebook_value, the eight elements a warp lane owns in the bitstream's own order
// (exl3_linear). Both give exactly cpu::decode's values.
#include <cuda_fp16.h>

#include <cstdint>

#include "frank/core/linear_weight.h"
#include "frank/cpu/quant/exl3_codebook.h"

namespace frank::cuda::exl3 {

constexpr int kTileSide = 16;

// Word j of a tile: two little-endian uint16 (exl3_tile_states).
__device__ __forceinline__ uint32_t tile_word(const uint16_t* tile, int j) {
  return tile[2 * j] | (static_cast<uint32_t>(tile[2 * j + 1]) << 16);
}

// The trellis state at tile position (r, c): bitstream element t is the inverse of the tensor-core
// permutation (lane 4 (c mod 8) + (r mod 8) / 2, half c / 8, index r mod 2 + 2 (r / 8)); its state
// is the 16 stream bits ending at bit (t + 1) K, read circularly (exl3_tile_states).
__device__ __forceinline__ uint32_t position_state(const uint16_t* tile, int bits, int r, int c) {
  const int t = 8 * (4 * (c % 8) + (r % 8) / 2) + 4 * (c / 8) + (r % 2) + 2 * (r / 8);
  const int stream_bits = 256 * bits;
  const int start = ((t + 1) * bits - 16 + stream_bits) % stream_bits;
  const int first = start / 32;
  const uint64_t window =
      (static_cast<uint64_t>(tile_word(tile, first)) << 32) | tile_word(tile, (first + 1) % (8 * bits));
  return static_cast<uint32_t>(window >> (48 - start % 32)) & 0xFFFFu;
}

__device__ __forceinline__ float half_bits(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

// The codebook value of a state as fp32 holding an fp16 (exl3_codebook_value): the exact fp32
// sum or fma, rounded once to fp16.
__device__ __forceinline__ float codebook_value(Exl3Codebook codebook, uint32_t x) {
  float exact;
  if (codebook == Exl3Codebook::Mul1) {
    const uint32_t y = x * 0x83DCD12Du;
    const uint32_t sum = (y & 0xFFu) + ((y >> 8) & 0xFFu) + ((y >> 16) & 0xFFu) + (y >> 24);
    exact = __fadd_rn(__fmul_rn(static_cast<float>(1024u + sum), 1774.0f / 262144.0f), -1329.0f / 128.0f);
  } else {
    uint32_t y = codebook == Exl3Codebook::Mcg ? x * 0xCBAC1FEDu : x * 89226354u + 64248484u;
    y = (y & 0x8FFF8FFFu) ^ 0x3B603B60u;
    exact = __fadd_rn(half_bits(y & 0xFFFFu), half_bits(y >> 16));
  }
  return __half2float(__float2half_rn(exact));
}

// codebook_value in fewer instructions, for exl3_linear's decoder; the same value for every state
// (the tests compare that decoder with cpu::decode on all of them). 3INST and MCG: one fp16 add of
// the two halves rounds their exact sum once to fp16, as codebook_value's fp32 add (exact: the
// halves are +-[0.125, 2), exl3_codebook.cpp) and rounding do. MUL1: the byte sum by one dp4a
// (integer, exact), then codebook_value's float operations.
__device__ __forceinline__ float fast_codebook_value(Exl3Codebook codebook, uint32_t x) {
  if (codebook == Exl3Codebook::Mul1) {
    const uint32_t sum = __dp4a(x * cpu::kExl3Mul1Multiplier, 0x01010101u, 0u);
    const float exact = __fadd_rn(__fmul_rn(static_cast<float>(1024u + sum), cpu::kExl3Mul1Inv), cpu::kExl3Mul1Bias);
    return __half2float(__float2half_rn(exact));
  }
  uint32_t y = codebook == Exl3Codebook::Mcg ? x * cpu::kExl3McgMultiplier
                                             : x * cpu::kExl3ThreeInstMultiplier + cpu::kExl3ThreeInstIncrement;
  y = (y & 0x8FFF8FFFu) ^ 0x3B603B60u;
  return __half2float(__hadd(__ushort_as_half(static_cast<unsigned short>(y & 0xFFFFu)),
                             __ushort_as_half(static_cast<unsigned short>(y >> 16))));
}

// Lane l of a warp owns bitstream elements 8l .. 8l + 7 of a tile (the mma B-fragment order,
// exl3_tile_positions): element i sits at row 2 (l mod 4) + (i mod 2) + 8 ((i mod 4) / 2) and column
// l / 4 + 8 (i / 4). Their states are the 16-bit windows starting at stream bits s + iK, s = (8l +
// 1) K - 16 (mod 256K): all inside the kWords tile words from word s / 32 on (circularly). Once those
// words are shifted left by s mod 32, window i starts at the compile-time bit iK, so each state is
// one shift or funnel shift and a mask. K is a template parameter for that reason.
template <int K>
struct LaneStates {
  // Words holding bits [s, s + 7K + 16) for any s mod 32 (one more than the shifted windows need).
  static constexpr int kWords = 1 + (7 * K + 16 + 31) / 32;
  static constexpr int kTileWords = 8 * K;

  int first;       // s / 32
  unsigned shift;  // s mod 32

  // Where the lane's element i sits in the tile.
  __device__ static int row(int lane, int i) { return 2 * (lane % 4) + i % 2 + 8 * ((i % 4) / 2); }
  __device__ static int column(int lane, int i) { return lane / 4 + 8 * (i / 4); }

  __device__ explicit LaneStates(int lane) {
    const int start = ((8 * lane + 1) * K - 16 + 256 * K) % (256 * K);
    first = start / 32;
    shift = static_cast<unsigned>(start % 32);
  }

  // The lane's words of one tile (`tile` 4-byte aligned: 8K uint32, each two little-endian uint16).
  __device__ __forceinline__ void load(const uint32_t* tile, uint32_t (&words)[kWords]) const {
#pragma unroll
    for (int m = 0; m < kWords; ++m) words[m] = __ldg(tile + (first + m) % kTileWords);
  }

  // q[i] = the codebook value of element i. One uniform branch per tile on the codebook, so each
  // codebook's decode is straight-line code.
  __device__ __forceinline__ void decode(Exl3Codebook codebook, const uint32_t (&words)[kWords], float (&q)[8]) const {
    uint32_t window[kWords - 1];  // stream bits [s + 32m, s + 32m + 32), MSB first
#pragma unroll
    for (int m = 0; m + 1 < kWords; ++m) window[m] = __funnelshift_l(words[m + 1], words[m], shift);
    uint32_t state[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      // State i: bits [o, o + 16) of window[w] and, if o > 16, of window[w + 1] (which then exists:
      // iK + 16 <= 7K + 16 fits in the windows).
      const int bit = i * K, w = bit / 32, o = bit % 32;
      const int next = w + 1 < kWords - 1 ? w + 1 : w;
      state[i] = (o <= 16 ? window[w] >> (16 - o) : __funnelshift_l(window[next], window[w], o - 16)) & 0xFFFFu;
    }
    if (codebook == Exl3Codebook::Mul1) {
#pragma unroll
      for (int i = 0; i < 8; ++i) q[i] = fast_codebook_value(Exl3Codebook::Mul1, state[i]);
    } else if (codebook == Exl3Codebook::Mcg) {
#pragma unroll
      for (int i = 0; i < 8; ++i) q[i] = fast_codebook_value(Exl3Codebook::Mcg, state[i]);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) q[i] = fast_codebook_value(Exl3Codebook::ThreeInst, state[i]);
    }
  }
};

}  // namespace frank::cuda::exl3
