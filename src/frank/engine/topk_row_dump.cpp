#include "frank/engine/topk_row_dump.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>

#include "frank/core/error.h"

namespace frank::engine {
namespace {

static_assert(std::endian::native == std::endian::little, "the dump is written in native order");
constexpr char kMagic[4] = {'F', 'T', 'K', 'R'};
constexpr uint32_t kVersion = 1;

template <class T>
void put(std::ofstream& out, const T& v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <class T>
bool get(std::ifstream& in, T& v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(&v), sizeof(T)));
}

}  // namespace

TopkRowDump::TopkRowDump(const std::filesystem::path& dir) : path_(dir / "topk-rows.bin") {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw Error(fmt::format("--dump-topk-rows: cannot write '{}'", path_.string()));
  out_.write(kMagic, 4);
  put(out_, kVersion);
}

void TopkRowDump::write(int64_t position, int k, std::span<const float> scores) {
  put(out_, position);
  put(out_, static_cast<int32_t>(k));
  put(out_, static_cast<int32_t>(scores.size()));
  out_.write(reinterpret_cast<const char*>(scores.data()), static_cast<std::streamsize>(scores.size_bytes()));
  if (!out_) throw Error(fmt::format("--dump-topk-rows: writing '{}' failed", path_.string()));
  ++rows_;
}

std::vector<TopkRow> read_topk_rows(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  char magic[4] = {};
  uint32_t version = 0;
  if (!in || !in.read(magic, 4) || std::memcmp(magic, kMagic, 4) != 0 || !get(in, version) || version != kVersion)
    throw Error(fmt::format("'{}' is not a top-k row dump (version {})", file.string(), kVersion));
  std::vector<TopkRow> rows;
  TopkRow row;
  while (get(in, row.position)) {
    int32_t k = 0, n = 0;
    if (!get(in, k) || !get(in, n) || k < 1 || n < 0)
      throw Error(fmt::format("'{}': a row header is cut short or bad", file.string()));
    row.k = k;
    row.scores.resize(static_cast<size_t>(n));
    if (!in.read(reinterpret_cast<char*>(row.scores.data()), static_cast<std::streamsize>(n) * 4))
      throw Error(fmt::format("'{}': row {} is cut short", file.string(), rows.size()));
    rows.push_back(row);
  }
  return rows;
}

}  // namespace frank::engine
