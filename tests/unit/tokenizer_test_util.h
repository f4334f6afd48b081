#pragma once
// Shared by the tokenizer tests: the committed DeepSeek-V4 tokenizer (loaded once per process,
// it takes about a second) and the fixture files that tools/reference/make_tokenizer_fixtures.py
// wrote with HF tokenizers.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frank/model/tokenizer.h"

namespace frank::test {

inline std::filesystem::path tokenizer_fixture_dir() { return std::filesystem::path(FRANK_FIXTURE_DIR) / "tokenizer"; }

inline std::filesystem::path deepseek_tokenizer_path() {
  return tokenizer_fixture_dir() / "deepseek-v4" / "tokenizer.json";
}

inline const model::Tokenizer& deepseek_tokenizer() {
  static const model::Tokenizer tokenizer = model::Tokenizer::load(deepseek_tokenizer_path());
  return tokenizer;
}

inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("test fixture missing: " + path.string());
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

}  // namespace frank::test
