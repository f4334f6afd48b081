#pragma once
// Helpers for the lab tests: the fixtures written by tools/reference/make_lab_fixtures.py, a small
// valid design to vary, and rows built in memory or written to a temporary file.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frank/lab/row.h"
#include "safetensors_test_util.h"

namespace frank::lab::test {

using frank::test::TempDir;

inline nlohmann::json lab_fixture(const std::string& name) {
  const auto path = std::filesystem::path(FRANK_FIXTURE_DIR) / "lab" / name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing fixture " + path.string());
  return nlohmann::json::parse(in).at("cases");
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Two arms ("main" the baseline, "fast" the treatment), `blocks` blocks, lower is better,
// the all-blocks-better rule. Tests change what they need.
inline nlohmann::json small_design(int blocks = 3) {
  auto arm = [](const std::string& name, int port) {
    return nlohmann::json{{"name", name},
                          {"start", "frank serve --port " + std::to_string(port)},
                          {"url", "http://127.0.0.1:" + std::to_string(port)},
                          {"health", "/health"}};
  };
  return {{"format", "frank-lab-design/1"},
          {"name", "small"},
          {"arms", {arm("main", 8100), arm("fast", 8101)}},
          {"baseline", "main"},
          {"blocks", blocks},
          {"draws_per_start", 1},
          {"workload", {{"name", "unit"}}},
          {"metric", {{"name", "time_s"}, {"better", "lower"}}},
          {"decision", {{"kind", "all_blocks_better"}}}};
}

// A draw of metric "time_s", the small design's metric.
inline Row make_row(int64_t block, const std::string& arm, double value, int64_t start = 0, int64_t draw = 0) {
  Row r;
  r.block = block;
  r.arm = arm;
  r.start = start;
  r.draw = draw;
  r.metrics["time_s"] = value;
  r.origin = "test";
  return r;
}

// One draw per arm per block: pairs[b] = {baseline, treatment}.
inline std::vector<Row> paired_rows(const std::vector<std::pair<double, double>>& pairs) {
  std::vector<Row> rows;
  for (size_t b = 0; b < pairs.size(); ++b) {
    rows.push_back(make_row(int64_t(b), "main", pairs[b].first));
    rows.push_back(make_row(int64_t(b), "fast", pairs[b].second));
  }
  return rows;
}

}  // namespace frank::lab::test
