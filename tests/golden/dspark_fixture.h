#pragma once
// The DeepSeek-V4.1 DSpark fixture (tools/reference/make_dspark_fixture.py,
// tests/fixtures/dsv41-dspark/tiny-v41-dspark): the tiny-v41-native main model plus three DSpark
// stages, and golden.json, features.f32, draft_logits.f32, drafts.i32, confidence.f32. The Engram hash
// data are tiny-v41-native's (same main model, same tokenizer).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <span>
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

// What the drafter tests read of golden.json: the sequence, the anchors, the vocabulary and the
// features' width (n_targets * hidden).
struct DSparkGolden {
  std::vector<int32_t> ids;
  std::vector<int> anchors;
  int64_t vocab = 0, width = 0;
};

inline DSparkGolden dspark_golden_data() {
  const auto j = dspark_golden();
  DSparkGolden g;
  g.ids = j.at("ids").get<std::vector<int32_t>>();
  g.anchors = j.at("anchors").get<std::vector<int>>();
  g.vocab = j.at("vocab_size").get<int64_t>();
  g.width = j.at("hidden_size").get<int64_t>() *
            static_cast<int64_t>(j.at("settings").at("dspark_target_layer_ids").size());
  return g;
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

// max over i of |got - want| / max(1, |want|): how the DSpark tests compare logits and features
// with the fixture's, on either backend.
inline double max_scaled_diff(std::span<const float> got, std::span<const float> want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0.0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    worst = std::max(worst, std::abs(double{got[i]} - want[i]) / std::max(1.0, std::abs(double{want[i]})));
  return worst;
}

}  // namespace frank::test
