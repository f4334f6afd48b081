#include "frank/cpu/quant/exl3_trellis.h"

#include <fmt/format.h>

#include "frank/core/error.h"

namespace frank::cpu {
namespace {

std::array<std::uint8_t, kExl3TileElements> make_positions() {
  // Lane l of a warp holds 8 consecutive elements: rows r0, r0+1, r0+8, r0+9 (r0 = 2(l mod 4)) of
  // column l/4, then the same rows of column l/4 + 8.
  std::array<std::uint8_t, kExl3TileElements> position{};
  for (int lane = 0; lane < 32; ++lane) {
    const int r0 = (lane % 4) * 2, c0 = lane / 4;
    const int rows[4] = {r0, r0 + 1, r0 + 8, r0 + 9};
    for (int half = 0; half < 2; ++half)
      for (int i = 0; i < 4; ++i)
        position[static_cast<size_t>(lane * 8 + half * 4 + i)] =
            static_cast<std::uint8_t>(rows[i] * kExl3TileSide + c0 + 8 * half);
  }
  return position;
}

void check_bits(int bits) {
  if (bits < kExl3MinBits || bits > kExl3MaxBits)
    throw Error(fmt::format("EXL3 trellis: {} bits per weight (expected {}..{})", bits, kExl3MinBits, kExl3MaxBits));
}

}  // namespace

std::array<std::uint16_t, kExl3TileElements> exl3_tile_states(const std::uint16_t* tile, int bits) {
  check_bits(bits);
  const int n_words = 8 * bits, stream_bits = kExl3TileElements * bits;
  std::array<std::uint32_t, 8 * kExl3MaxBits> words{};
  for (int j = 0; j < n_words; ++j)  // low uint16 first: little-endian uint32
    words[static_cast<size_t>(j)] = tile[2 * j] | (static_cast<std::uint32_t>(tile[2 * j + 1]) << 16);
  std::array<std::uint16_t, kExl3TileElements> states{};
  for (int t = 0; t < kExl3TileElements; ++t) {
    // The 16 bits start at stream bit p (mod the tile) and lie in word p/32 and possibly the next
    // one (circularly); as a 64-bit big-endian window they end 48 - p mod 32 bits above bit 0.
    const int start = ((t + 1) * bits - 16 + stream_bits) % stream_bits;
    const int first = start / 32;
    const std::uint64_t window = (static_cast<std::uint64_t>(words[static_cast<size_t>(first)]) << 32) |
                                 words[static_cast<size_t>((first + 1) % n_words)];
    states[static_cast<size_t>(t)] = static_cast<std::uint16_t>(window >> (48 - start % 32));
  }
  return states;
}

const std::array<std::uint8_t, kExl3TileElements>& exl3_tile_positions() {
  static const std::array<std::uint8_t, kExl3TileElements> positions = make_positions();
  return positions;
}

std::array<std::uint16_t, kExl3TileElements> exl3_decode_tile(const std::uint16_t* tile, int bits,
                                                              Exl3Codebook codebook) {
  const auto states = exl3_tile_states(tile, bits);
  const auto& positions = exl3_tile_positions();
  std::array<std::uint16_t, kExl3TileElements> out{};
  for (size_t t = 0; t < states.size(); ++t) out[positions[t]] = exl3_codebook_value(codebook, states[t]);
  return out;
}

void validate(const Exl3Trellis& trellis) {
  check_bits(trellis.bits);
  if (trellis.tiles_k < 0 || trellis.tiles_n < 0)
    throw Error(fmt::format("EXL3 trellis: negative tile counts [{}, {}]", trellis.tiles_k, trellis.tiles_n));
  if (trellis.tiles_k > 0 && trellis.tiles_n > 0 && trellis.words == nullptr)
    throw Error(fmt::format("EXL3 trellis: null data for [{}, {}] tiles", trellis.tiles_k, trellis.tiles_n));
}

std::vector<std::uint16_t> decode(const Exl3Trellis& trellis) {
  validate(trellis);
  const std::int64_t n = trellis.out_features();
  std::vector<std::uint16_t> q(static_cast<size_t>(trellis.in_features() * n));
  for (std::int64_t kt = 0; kt < trellis.tiles_k; ++kt)
    for (std::int64_t nt = 0; nt < trellis.tiles_n; ++nt) {
      const std::uint16_t* words = trellis.words + (kt * trellis.tiles_n + nt) * trellis.words_per_tile();
      const auto tile = exl3_decode_tile(words, trellis.bits, trellis.codebook);
      for (int r = 0; r < kExl3TileSide; ++r)
        for (int c = 0; c < kExl3TileSide; ++c)
          q[static_cast<size_t>((kt * kExl3TileSide + r) * n + nt * kExl3TileSide + c)] =
              tile[static_cast<size_t>(r * kExl3TileSide + c)];
    }
  return q;
}

int exl3_bits_from_shape(const std::string& name, const std::vector<std::int64_t>& shape) {
  if (shape.size() != 3)
    throw Error(fmt::format("EXL3 tensor '{}' has {} dimensions; a trellis is [in/16, out/16, 16*bits]", name,
                            shape.size()));
  if (shape[0] <= 0 || shape[1] <= 0 || shape[2] <= 0)
    throw Error(fmt::format("EXL3 tensor '{}' has shape [{}, {}, {}]: every dimension must be positive", name, shape[0],
                            shape[1], shape[2]));
  const std::int64_t width = shape[2];
  if (width % 16 == 8 && width / 16 >= 1 && width / 16 <= 3)
    throw Error(fmt::format("EXL3 tensor '{}' has {} words per tile: a half-integer bitrate ({}.5 bits, "
                            "exllamav3's mul1 'frac' format) that frank does not support",
                            name, width, width / 16));
  if (width % 16 != 0 || width / 16 < kExl3MinBits || width / 16 > kExl3MaxBits)
    throw Error(fmt::format("EXL3 tensor '{}' has {} words per tile: not 16 * bits for bits {}..{}", name, width,
                            kExl3MinBits, kExl3MaxBits));
  return static_cast<int>(width / 16);
}

}  // namespace frank::cpu
