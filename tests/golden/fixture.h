#pragma once
// Golden fixtures made by tools/reference/make_dsv4_fixtures.py with transformers: a checkpoint
// directory, golden.json (token ids and how transformers itself was run) and logits.f32 (the
// full-sequence logits, little-endian float32 [n_tokens, vocab]).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frank/core/error.h"
#include "frank/core/tensor.h"
#include "frank/engine/session_runner.h"

namespace frank::test {

struct Fixture {
  std::filesystem::path dir;
  nlohmann::json meta;
  std::vector<int32_t> ids;
  std::vector<float> logits;  // [ids.size(), vocab]
  int64_t vocab = 0;

  std::string name() const { return dir.filename().string(); }
};

// `family`: "dsv4" (make_dsv4_fixtures.py) or "dsv41" (make_dsv41_fixtures.py).
inline std::filesystem::path fixture_root(const char* family = "dsv4") {
  return std::filesystem::path(FRANK_FIXTURE_DIR) / family;
}

inline std::vector<std::filesystem::path> fixture_dirs(const char* family = "dsv4") {
  std::vector<std::filesystem::path> dirs;
  if (!std::filesystem::exists(fixture_root(family))) return dirs;
  for (const auto& entry : std::filesystem::directory_iterator(fixture_root(family)))
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

// A logits file `frank logits` wrote: float32 [f.ids.size(), f.vocab]; throws frank::Error when its
// size is different.
inline std::vector<float> read_logits_file(const Fixture& f, const std::filesystem::path& path) {
  std::vector<float> got(f.logits.size());
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(got.size() * 4));
  if (!in || in.peek() != EOF) throw Error(path.string() + ": the logits file has the wrong size");
  return got;
}

// Logits of the fixture's ids fed to a fresh session in the fixture's own chunk list (the one
// transformers' chunked run used).
inline Tensor fixture_chunk_logits(engine::SessionRunner& fresh, const Fixture& f) {
  const auto chunks = f.meta.at("chunks").get<std::vector<int64_t>>();
  Tensor logits({static_cast<int64_t>(f.ids.size()), f.vocab});
  int64_t begin = 0;
  for (int64_t n : chunks) {
    if (begin + n > static_cast<int64_t>(f.ids.size())) throw Error("fixture " + f.name() + ": chunks pass the ids");
    const Tensor part = fresh.forward(std::span<const int32_t>(f.ids).subspan(begin, n), engine::Model::Logits::All);
    std::copy(part.data.begin(), part.data.end(), logits.row(begin));
    begin += n;
  }
  if (begin != static_cast<int64_t>(f.ids.size())) throw Error("fixture " + f.name() + ": chunks miss some ids");
  return logits;
}

// frank's logits [ids, vocab] against the fixture's, |frank - transformers| <= rel_tolerance *
// max(1, |transformers|) per logit: the largest differences and the first failing logit, named by
// position, token and vocabulary index.
struct LogitComparison {
  double max_abs = 0.0, max_rel = 0.0;
  int failures = 0;
  std::string first_failure;
};

inline LogitComparison compare_logits(const Fixture& f, const Tensor& logits, double rel_tolerance) {
  LogitComparison r;
  for (size_t t = 0; t < f.ids.size(); ++t)
    for (int64_t v = 0; v < f.vocab; ++v) {
      const double want = f.logits[t * f.vocab + v], got = logits.row(static_cast<int64_t>(t))[v];
      const double diff = std::abs(got - want);
      r.max_abs = std::max(r.max_abs, diff);
      r.max_rel = std::max(r.max_rel, diff / std::max(1.0, std::abs(want)));
      if (!(diff <= rel_tolerance * std::max(1.0, std::abs(want))) && r.failures++ == 0)
        r.first_failure = fmt::format("position {} (token {}), vocab {}: frank {} vs transformers {}", t, f.ids[t], v,
                                      got, want);
    }
  return r;
}

}  // namespace frank::test
