#pragma once
// Chat fixtures made by tools/reference/make_chat_fixtures.py with DeepSeek's reference encoder
// (encoding_dsv4.py): OpenAI-style requests with their exact prompts, the completions of their
// assistant turns with DeepSeek's parse of them, and extra parser cases.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frank/core/error.h"

namespace frank::test {

inline std::filesystem::path chat_fixture_dir() { return std::filesystem::path(FRANK_FIXTURE_DIR) / "chat"; }

// One JSON value per line, keys in file order (the order is part of the prompt).
inline std::vector<nlohmann::ordered_json> read_chat_records(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open " + path.string());
  std::vector<nlohmann::ordered_json> records;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) records.push_back(nlohmann::ordered_json::parse(line));
  return records;
}

inline std::vector<nlohmann::ordered_json> chat_conversations() {
  return read_chat_records(chat_fixture_dir() / "dsv4_conversations.jsonl");
}

inline std::vector<nlohmann::ordered_json> chat_parser_cases() {
  return read_chat_records(chat_fixture_dir() / "dsv4_parser_cases.jsonl");
}

}  // namespace frank::test
