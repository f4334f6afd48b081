// The EXL3 CPU reference decoder (src/frank/cpu/quant/exl3_*): codebooks and tiles against the
// golden data of exllamav3 1.6.5 (tools/reference/make_exl3_fixtures.py), hand-worked cases of the
// format notes, and rejection of malformed trellises. Every comparison is bit for bit: the decoder
// must reproduce the CUDA kernels exactly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>

#include "frank/core/error.h"
#include "frank/cpu/quant/exl3_codebook.h"
#include "frank/cpu/quant/exl3_trellis.h"
#include "unit/exl3_test_util.h"

namespace frank::cpu {
namespace {

using test::Exl3Golden;
using test::pack_tile;
using ::testing::HasSubstr;

constexpr Exl3Codebook kCodebooks[] = {Exl3Codebook::ThreeInst, Exl3Codebook::Mcg, Exl3Codebook::Mul1};

std::string name_of(Exl3Codebook cb) { return std::string(exl3_codebook_name(cb)); }

// Worked by hand from docs/exl3-format.md §2:
//  MCG, state 0: y = 0, (0 & mask) ^ 0x3B603B60 gives halves 0x3B60 = 0.921875 twice; 1.84375 = 0x3F60.
//  MUL1, state 0: byte sum 0, (1024 * 1774 - 2721792) * 2^-18 = -3.453125 = 0xC2E8.
TEST(Exl3Codebook, HandWorkedStates) {
  EXPECT_EQ(exl3_codebook_value(Exl3Codebook::Mcg, 0), 0x3F60);
  EXPECT_EQ(exl3_codebook_value(Exl3Codebook::Mul1, 0), 0xC2E8);
}

// Every one of the 65,536 states, bit for bit.
void expect_matches_table(Exl3Codebook cb, const std::vector<std::uint16_t>& table) {
  ASSERT_EQ(table.size(), 65536u);
  int mismatches = 0;
  for (std::uint32_t s = 0; s < 65536u; ++s) {
    const std::uint16_t ours = exl3_codebook_value(cb, static_cast<std::uint16_t>(s));
    if (ours != table[s] && ++mismatches <= 5)
      ADD_FAILURE() << name_of(cb) << " state " << s << ": ours 0x" << std::hex << ours << ", exllamav3 0x" << table[s];
  }
  EXPECT_EQ(mismatches, 0) << name_of(cb);
}

std::optional<Exl3Golden> codebook_tables() { return Exl3Golden::open("codebooks.safetensors"); }

// Made on any machine, by exllamav3's pure-torch mul1_codebook. (A separate fp16 multiply and add
// instead of one rounding fails on 60,326 states.)
TEST(Exl3Codebook, Mul1MatchesExllamav3ForAllStates) {
  const auto golden = codebook_tables();
  ASSERT_TRUE(golden && golden->has("mul1")) << "tests/fixtures/exl3/codebooks.safetensors lacks the MUL1 table";
  expect_matches_table(Exl3Codebook::Mul1, golden->u16("mul1"));
}

// Made by exllamav3's CUDA ext.decode (the GPU run of make_exl3_fixtures.py).
TEST(Exl3Codebook, ThreeInstAndMcgMatchExllamav3ForAllStates) {
  const auto golden = codebook_tables();
  if (!golden || !golden->has("3inst") || !golden->has("mcg"))
    GTEST_SKIP() << "no 3INST/MCG tables yet: they need the GPU run of tools/reference/make_exl3_fixtures.py";
  expect_matches_table(Exl3Codebook::ThreeInst, golden->u16("3inst"));
  expect_matches_table(Exl3Codebook::Mcg, golden->u16("mcg"));
}

TEST(Exl3Trellis, TilePositionsAreTheTensorCoreFragmentOrder) {
  const auto& positions = exl3_tile_positions();
  // Lane 0: rows 0, 1, 8, 9 of column 0, then of column 8.
  EXPECT_THAT(std::vector<int>(positions.begin(), positions.begin() + 8),
              ::testing::ElementsAre(0, 16, 128, 144, 8, 24, 136, 152));
  // Lane 5: r0 = 2 * (5 mod 4) = 2, c0 = 5 / 4 = 1.
  EXPECT_THAT(std::vector<int>(positions.begin() + 40, positions.begin() + 48),
              ::testing::ElementsAre(33, 49, 161, 177, 41, 57, 169, 185));
  std::vector<bool> seen(256, false);
  for (const auto p : positions) seen[p] = true;
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), 256) << "a permutation of the tile";
}

// K = 8 with symbol t = t: the stream bytes are 0, 1, 2, ..., so each uint32 word is big-endian
// bytes (0, 1, 2, 3) = 0x00010203, stored as halves 0x0203, 0x0001. The state of element t is
// (symbol t-1, symbol t), and element 0 wraps to symbol 255.
TEST(Exl3Trellis, ByteLayoutAtEightBits) {
  std::vector<std::uint32_t> symbols(256);
  for (std::uint32_t t = 0; t < 256; ++t) symbols[t] = t;
  const auto tile = pack_tile(symbols, 8);
  ASSERT_EQ(tile[0], 0x0203);
  ASSERT_EQ(tile[1], 0x0001);
  const auto states = exl3_tile_states(tile.data(), 8);
  EXPECT_EQ(states[0], 0xFF00);
  EXPECT_EQ(states[1], 0x0001);
  EXPECT_EQ(states[2], 0x0102);
  EXPECT_EQ(states[255], 0xFEFF);
}

// Random symbols at every K: state t = (state t-1 << K | symbol t) mod 2^16, tail-biting, i.e. the
// symbols t, t-1, t-2, ... (circularly) stacked from bit 0 up.
TEST(Exl3Trellis, StatesFollowTheShiftRegisterAtEveryBitWidth) {
  std::mt19937 rng(11);
  for (int bits = 1; bits <= 8; ++bits) {
    std::vector<std::uint32_t> symbols(256);
    for (auto& s : symbols) s = rng() & ((1u << bits) - 1u);
    const auto states = exl3_tile_states(pack_tile(symbols, bits).data(), bits);
    for (int t = 0; t < 256; ++t) {
      std::uint32_t want = 0;
      for (int back = 0; back * bits < 16; ++back)
        want |= symbols[static_cast<size_t>((t - back + 256) % 256)] << (back * bits);
      ASSERT_EQ(states[static_cast<size_t>(t)], want & 0xFFFFu) << "K " << bits << " element " << t;
    }
  }
}

// Placement: a 2 x 3-tile trellis at K = 8 where tile (kt, nt) repeats one byte b (every state
// b * 257), except that tile (1, 2) has symbol 8 = 0xFF among zeros: its element 8 (lane 1, first
// value: row 2, column 0) has state 0x00FF and element 9 (row 3, column 0) state 0xFF00.
TEST(Exl3Trellis, DecodePlacesTilesAndElements) {
  const std::int64_t tiles_k = 2, tiles_n = 3;
  std::vector<std::uint16_t> words;
  for (int tile = 0; tile < tiles_k * tiles_n; ++tile) {
    std::vector<std::uint32_t> symbols(256, static_cast<std::uint32_t>(17 * tile + 3));
    if (tile == 5) {
      std::fill(symbols.begin(), symbols.end(), 0u);
      symbols[8] = 0xFF;
    }
    const auto packed = pack_tile(symbols, 8);
    words.insert(words.end(), packed.begin(), packed.end());
  }
  const Exl3Trellis trellis{words.data(), tiles_k, tiles_n, 8, Exl3Codebook::Mul1};
  const auto q = decode(trellis);
  ASSERT_EQ(q.size(), 32u * 48u);
  const auto at = [&](std::int64_t row, std::int64_t col) { return q[static_cast<size_t>(row * 48 + col)]; };
  const auto value = [](std::uint32_t state) {
    return exl3_codebook_value(Exl3Codebook::Mul1, static_cast<std::uint16_t>(state));
  };
  for (std::int64_t kt = 0; kt < tiles_k; ++kt)
    for (std::int64_t nt = 0; nt < tiles_n; ++nt) {
      if (kt == 1 && nt == 2) continue;
      const std::uint32_t byte = static_cast<std::uint32_t>(17 * (kt * tiles_n + nt) + 3);
      for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) ASSERT_EQ(at(16 * kt + r, 16 * nt + c), value(byte * 257)) << kt << "," << nt;
    }
  EXPECT_EQ(at(16 + 2, 32 + 0), value(0x00FF));
  EXPECT_EQ(at(16 + 3, 32 + 0), value(0xFF00));
  EXPECT_EQ(at(16 + 0, 32 + 0), value(0));
  EXPECT_EQ(at(16 + 2, 32 + 8), value(0));
}

// Random trellises decoded by exllamav3's ext.reconstruct (CUDA), at every K and codebook.
TEST(Exl3Trellis, MatchesExllamav3ReconstructBitForBit) {
  const auto golden = Exl3Golden::open("tiles.safetensors");
  if (!golden) GTEST_SKIP() << "tests/fixtures/exl3/tiles.safetensors needs the GPU run of make_exl3_fixtures.py";
  std::vector<std::pair<std::string, int>> cases;
  for (int bits = 1; bits <= 8; ++bits) cases.emplace_back("K" + std::to_string(bits), bits);
  cases.emplace_back("wide", 3);
  int compared = 0;
  for (const auto& [name, bits] : cases) {
    const auto& shape = golden->shape(name + ".trellis");
    ASSERT_EQ(exl3_bits_from_shape(name + ".trellis", shape), bits);
    const auto words = golden->u16(name + ".trellis");
    for (const Exl3Codebook cb : kCodebooks) {
      const std::string key = name + "." + name_of(cb);
      if (!golden->has(key)) continue;
      const auto q = decode(Exl3Trellis{words.data(), shape[0], shape[1], bits, cb});
      const auto want = golden->u16(key);
      ASSERT_EQ(q.size(), want.size()) << key;
      size_t differing = 0, first = q.size();
      for (size_t i = 0; i < q.size(); ++i)
        if (q[i] != want[i] && differing++ == 0) first = i;
      const auto cols = static_cast<size_t>(16 * shape[1]);
      EXPECT_EQ(differing, 0u) << key << ": the first difference at Q[" << first / cols << ", " << first % cols << "]";
      ++compared;
    }
  }
  EXPECT_EQ(compared, 8 * 3 + 1);
}

TEST(Exl3Trellis, BitsFromShapeAndRejections) {
  EXPECT_EQ(exl3_bits_from_shape("w.trellis", {320, 144, 48}), 3);
  EXPECT_EQ(exl3_bits_from_shape("w.trellis", {1, 1, 128}), 8);
  const auto error_of = [](const std::vector<std::int64_t>& shape) {
    try {
      exl3_bits_from_shape("layers.3.ffn.experts.7.w1.trellis", shape);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error_of({320, 2304}), HasSubstr("has 2 dimensions"));
  EXPECT_THAT(error_of({320, 0, 48}), HasSubstr("must be positive"));
  EXPECT_THAT(error_of({320, 144, 40}), HasSubstr("half-integer bitrate (2.5 bits"));
  EXPECT_THAT(error_of({320, 144, 50}), HasSubstr("not 16 * bits"));
  EXPECT_THAT(error_of({320, 144, 144}), HasSubstr("not 16 * bits"));
  EXPECT_THAT(error_of({320, 144, 50}), HasSubstr("layers.3.ffn.experts.7.w1.trellis"));

  const std::vector<std::uint16_t> words(16 * 9);
  EXPECT_THROW(decode(Exl3Trellis{words.data(), 1, 1, 9, Exl3Codebook::Mul1}), Error);
  EXPECT_THROW(decode(Exl3Trellis{words.data(), 1, 1, 0, Exl3Codebook::Mul1}), Error);
  EXPECT_THROW(decode(Exl3Trellis{nullptr, 1, 1, 3, Exl3Codebook::Mul1}), Error);
  EXPECT_THROW(decode(Exl3Trellis{words.data(), -1, 1, 3, Exl3Codebook::Mul1}), Error);
  EXPECT_THROW(exl3_tile_states(words.data(), 9), Error);
  EXPECT_TRUE(decode(Exl3Trellis{nullptr, 0, 4, 3, Exl3Codebook::Mul1}).empty());
}

}  // namespace
}  // namespace frank::cpu
