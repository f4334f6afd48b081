#include "frank/cpu/quant/exl3_kernels.h"

#include <vector>

namespace frank::cpu::detail {
namespace {

// The same stream arithmetic as exl3_tile_states (exl3_trellis.cpp), per position instead of per
// element: the 16 bits ending at stream bit (t + 1) K, read circularly, start at bit `start`.
Exl3StateSources make_sources(int bits) {
  Exl3StateSources s{};
  const int n_words = 8 * bits, stream_bits = kExl3TileElements * bits;
  const auto& positions = exl3_tile_positions();
  for (int t = 0; t < kExl3TileElements; ++t) {
    const int start = ((t + 1) * bits - 16 + stream_bits) % stream_bits;
    const int first = start / 32;
    const std::uint32_t shift = static_cast<std::uint32_t>(48 - start % 32);  // 17..48
    const size_t p = positions[static_cast<size_t>(t)];
    s.first[p] = first;
    s.second[p] = (first + 1) % n_words;
    s.shl_first[p] = 32u - shift;   // wraps (>= 32) when shift > 32
    s.shr_second[p] = shift;        // >= 32 when shift >= 32
    s.shr_first[p] = shift - 32u;   // wraps when shift < 32
  }
  return s;
}

std::vector<Exl3StateSources> make_all() {
  std::vector<Exl3StateSources> all;
  for (int bits = kExl3MinBits; bits <= kExl3MaxBits; ++bits) all.push_back(make_sources(bits));
  return all;
}

}  // namespace

const Exl3StateSources& exl3_state_sources(int bits) {
  static const std::vector<Exl3StateSources> all = make_all();
  return all.at(static_cast<size_t>(bits - kExl3MinBits));
}

}  // namespace frank::cpu::detail
