#pragma once
// The DeepSeek-V4.1 DSpark fixture (tools/reference/make_dspark_fixture.py,
// tests/fixtures/dsv41-dspark/tiny-v41-dspark): the tiny-v41-native main model plus three DSpark
// stages, and golden.json, features.f32, draft_logits.f32, drafts.i32, confidence.f32. The Engram hash
// data are tiny-v41-native's (same main model, same tokenizer).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frank/core/error.h"
#include "frank/model/loader_v41.h"

namespace frank::test {

inline std::filesystem::path dspark_fixture_dir() {
  return std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv41-dspark" / "tiny-v41-dspark";
}

inline std::filesystem::path dspark_engram_data() {
  return std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv41" / "tiny-v41-native" / "reference.safetensors";
}

inline model::LoadedV41Model load_dspark_fixture_model() {
  return model::load_v41_model(dspark_fixture_dir(), dspark_engram_data());
}

inline nlohmann::json dspark_golden() {
  std::ifstream in(dspark_fixture_dir() / "golden.json");
  return nlohmann::json::parse(in);
}

// A little-endian 4-byte-element file of the fixture, which must hold exactly `count` elements.
template <class T>
std::vector<T> read_dspark_file(const char* name, size_t count) {
  std::vector<T> out(count);
  std::ifstream in(dspark_fixture_dir() / name, std::ios::binary);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(count * sizeof(T)));
  if (!in || in.peek() != EOF) throw Error(std::string("DSpark fixture: ") + name + " has the wrong size");
  return out;
}

}  // namespace frank::test
