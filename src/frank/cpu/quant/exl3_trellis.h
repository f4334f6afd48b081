#pragma once
// ExLlamaV3 (EXL3) trellis-coded weights: unpacking the bitstream of 16x16 tiles into fp16 values.
// Layout and math: docs/exl3-format.md §1.1 and §2 (shared docs); pitfalls in §6.
//
// A quantized linear with k inputs and n outputs stores `trellis` I16 [k/16, n/16, 16K]: tile
// (kt, nt) covers input rows 16kt.. and output columns 16nt.. of Q [k, n] (the transpose of the
// usual [out, in]), and holds 256 symbols of K bits (K = 1..8, one per tensor). The full weight is
// W = diag(suh) H Q H diag(svh) with 128x128 Hadamard blocks (not done here).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "frank/cpu/quant/exl3_codebook.h"

namespace frank::cpu {

constexpr int kExl3TileSide = 16;
constexpr int kExl3TileElements = 256;
constexpr int kExl3MinBits = 1, kExl3MaxBits = 8;

// The state of each of a tile's 256 elements, in bitstream order. The tile is 16K uint16 words
// read as 8K little-endian uint32, each MSB-first; symbol t is stream bits [tK, tK + K) and the
// state of element t is the 16 stream bits ending at bit (t+1)K, read circularly (tail-biting:
// element 0's state ends with the tile's last bits). `bits` must be 1..8.
std::array<std::uint16_t, kExl3TileElements> exl3_tile_states(const std::uint16_t* tile, int bits);

// Where element t of the bitstream lands in its tile: position[t] = r * 16 + c, r the input (k)
// offset and c the output (n) offset. This is the mma.m16n8k16 B-fragment order
// (`tensor_core_perm` upstream).
const std::array<std::uint8_t, kExl3TileElements>& exl3_tile_positions();

// One decoded tile, fp16 bits, row-major [r][c] (r = input offset, c = output offset).
std::array<std::uint16_t, kExl3TileElements> exl3_decode_tile(const std::uint16_t* tile, int bits,
                                                              Exl3Codebook codebook);

// A non-owning view of one trellis tensor.
struct Exl3Trellis {
  const std::uint16_t* words = nullptr;  // [tiles_k, tiles_n, 16 * bits]
  std::int64_t tiles_k = 0, tiles_n = 0;
  int bits = 0;
  Exl3Codebook codebook = Exl3Codebook::ThreeInst;

  std::int64_t in_features() const { return tiles_k * kExl3TileSide; }
  std::int64_t out_features() const { return tiles_n * kExl3TileSide; }
  std::int64_t words_per_tile() const { return std::int64_t{16} * bits; }
};

// Throws frank::Error naming what is wrong: bits outside 1..8, negative tile counts, or null data
// for a non-empty trellis.
void validate(const Exl3Trellis& trellis);

// Q [in_features, out_features] as fp16 bits, row-major (the on-disk (in, out) orientation).
std::vector<std::uint16_t> decode(const Exl3Trellis& trellis);

// K from the shape of the tensor `name`, [k/16, n/16, 16K]. Throws frank::Error naming the tensor
// for a rank other than 3, an empty dimension, or a last dimension that is not 16K for K = 1..8 —
// with its own message for 16K + 8, the half-integer bitrates (K + 0.5) of newer exllamav3, which
// frank does not read.
int exl3_bits_from_shape(const std::string& name, const std::vector<std::int64_t>& shape);

}  // namespace frank::cpu
