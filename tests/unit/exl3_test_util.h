#pragma once
// Shared by the EXL3 tests: the golden files of tools/reference/make_exl3_fixtures.py (made by
// exllamav3 1.6.5) and a bitstream writer that packs symbols the way ExLlamaV3's packer does.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "frank/model/safetensors.h"

namespace frank::test {

inline std::filesystem::path exl3_fixture_dir() { return std::filesystem::path(FRANK_FIXTURE_DIR) / "exl3"; }

// One golden file, or nothing where the fixture run could not make it (parts that need a GPU).
class Exl3Golden {
 public:
  static std::optional<Exl3Golden> open(const std::string& filename) {
    const auto path = exl3_fixture_dir() / filename;
    if (!std::filesystem::exists(path)) return std::nullopt;
    return Exl3Golden(model::SafetensorsFile::open(path));
  }
  bool has(const std::string& name) const { return file_.tensors().count(name) != 0; }
  const std::vector<int64_t>& shape(const std::string& name) const { return file_.tensors().at(name).shape; }
  std::vector<std::uint16_t> u16(const std::string& name) const {  // F16 as bits, or I16 as uint16
    const auto bytes = file_.bytes(file_.tensors().at(name));
    std::vector<std::uint16_t> out(bytes.size() / 2);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }

 private:
  explicit Exl3Golden(model::SafetensorsFile file) : file_(std::move(file)) {}
  model::SafetensorsFile file_;
};

// Packs 256 symbols of `bits` bits into one tile of 16 * bits uint16 words as on disk: a stream
// that is MSB-first within each uint32 word, stored as two little-endian uint16 halves (ExLlamaV3's
// packer writes MSB-first uint16 halves and swaps them per uint32).
inline std::vector<std::uint16_t> pack_tile(const std::vector<std::uint32_t>& symbols, int bits) {
  std::vector<std::uint32_t> words(static_cast<size_t>(8 * bits), 0);
  for (size_t t = 0; t < symbols.size(); ++t)
    for (int b = 0; b < bits; ++b) {
      const size_t position = t * static_cast<size_t>(bits) + static_cast<size_t>(b);  // stream bit
      const std::uint32_t bit = (symbols[t] >> (bits - 1 - b)) & 1u;                    // symbol MSB first
      words[position / 32] |= bit << (31 - position % 32);
    }
  std::vector<std::uint16_t> tile;
  for (const std::uint32_t w : words) {
    tile.push_back(static_cast<std::uint16_t>(w & 0xFFFFu));
    tile.push_back(static_cast<std::uint16_t>(w >> 16));
  }
  return tile;
}

}  // namespace frank::test
