#pragma once
// Golden fixtures made by tools/reference/make_dsv4_fixtures.py with transformers: a checkpoint
// directory, golden.json (token ids and how transformers itself was run) and logits.f32 (the
// full-sequence logits, little-endian float32 [n_tokens, vocab]).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frank/core/error.h"

namespace frank::test {

struct Fixture {
  std::filesystem::path dir;
  nlohmann::json meta;
  std::vector<int32_t> ids;
  std::vector<float> logits;  // [ids.size(), vocab]
  int64_t vocab = 0;

  std::string name() const { return dir.filename().string(); }
};

inline std::filesystem::path fixture_root() { return std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv4"; }

inline std::vector<std::filesystem::path> fixture_dirs() {
  std::vector<std::filesystem::path> dirs;
  if (!std::filesystem::exists(fixture_root())) return dirs;
  for (const auto& entry : std::filesystem::directory_iterator(fixture_root()))
    if (std::filesystem::exists(entry.path() / "golden.json")) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

inline Fixture load_fixture(const std::filesystem::path& dir) {
  Fixture f;
  f.dir = dir;
  std::ifstream meta(dir / "golden.json");
  f.meta = nlohmann::json::parse(meta);
  f.ids = f.meta.at("ids").get<std::vector<int32_t>>();
  f.vocab = f.meta.at("vocab_size").get<int64_t>();
  std::ifstream in(dir / "logits.f32", std::ios::binary);
  f.logits.resize(f.ids.size() * static_cast<size_t>(f.vocab));
  in.read(reinterpret_cast<char*>(f.logits.data()), static_cast<std::streamsize>(f.logits.size() * 4));
  if (!in || in.peek() != EOF) throw Error("fixture " + dir.string() + ": logits.f32 has the wrong size");
  return f;
}

}  // namespace frank::test
