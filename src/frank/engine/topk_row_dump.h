#pragma once
// TopkRowDump: the indexer's score rows of a real run, written as they are selected from, so the
// GPU top-k kernels can be compared and timed on real calls, not only on synthetic rows
// (`frank logits|generate --dump-topk-rows DIR`; `frank_topk_check --rows FILE`).
//
// File format (DIR/topk-rows.bin, little-endian, appended row by row):
//   "FTKR" | u32 version 1 | then per row: i64 position | i32 k | i32 n | n x f32 scores
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <vector>

namespace frank::engine {

class TopkRowDump {
 public:
  // Creates DIR if needed and starts DIR/topk-rows.bin (replacing an old one); throws frank::Error.
  explicit TopkRowDump(const std::filesystem::path& dir);
  void write(int64_t position, int k, std::span<const float> scores);
  int64_t rows() const { return rows_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::ofstream out_;
  std::filesystem::path path_;
  int64_t rows_ = 0;
};

struct TopkRow {
  int64_t position;
  int k;
  std::vector<float> scores;
};

// Reads a dump back; throws frank::Error on a file that is not one (or is cut short).
std::vector<TopkRow> read_topk_rows(const std::filesystem::path& file);

}  // namespace frank::engine
