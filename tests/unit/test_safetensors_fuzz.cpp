// Randomized robustness test: mutate a valid checkpoint thousands of times (bit flips, truncation,
// random header bytes, JSON edits) and require that opening and reading every tensor either works
// or throws frank::Error. Any other exception, a crash, or a sanitizer report is a bug. The seed is
// fixed so a failure reproduces; the iteration number and mutation are printed.
#include <cctype>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include <gtest/gtest.h>

#include "frank/core/error.h"
#include "frank/model/checkpoint.h"
#include "frank/model/safetensors.h"
#include "safetensors_test_util.h"

namespace frank::model {
namespace {

using test::build_safetensors;
using test::raw_safetensors;
using test::TempDir;
using test::to_bytes;
using test::write_file;

constexpr int kFileMutations = 3000;
constexpr int kIndexMutations = 300;

std::string base_file() {
  return build_safetensors(
      {{"emb", "F32", {2, 3}, to_bytes(std::vector<float>{1, 2, 3, 4, 5, 6})},
       {"norm", "BF16", {4}, to_bytes(std::vector<uint16_t>{0x3F80, 0xC000, 0x7F80, 0x0001})},
       {"proj", "F16", {2, 2}, to_bytes(std::vector<uint16_t>{0x3C00, 0x0001, 0x7C00, 0x7E00})},
       {"ids", "I64", {2}, to_bytes(std::vector<int64_t>{-1, 1LL << 40})},
       {"small", "I8", {3}, to_bytes(std::vector<int8_t>{-1, 0, 1})},
       {"empty", "U8", {0}, ""},
       {"q", "F8_E4M3", {2}, "\x38\x40"}},
      {{"format", "pt"}});
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  template <typename T>
  const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }

  // Returns the mutated bytes and sets `what` to a short description for failure messages.
  std::string mutate(const std::string& file, std::string& what) {
    const uint64_t header_len = read_len(file);
    std::string header = file.substr(8, header_len);
    const std::string data = file.substr(8 + header_len);
    std::string out = file;
    switch (below(9)) {
      case 0: {  // flip a few bits anywhere
        const size_t n = 1 + below(4);
        for (size_t i = 0; i < n; ++i) out[below(out.size())] ^= static_cast<char>(1u << below(8));
        what = "bit flips";
        return out;
      }
      case 1:  // truncate at a random length
        out.resize(below(out.size()));
        what = "truncate to " + std::to_string(out.size());
        return out;
      case 2: {  // random bytes over the header (length kept)
        const size_t n = 1 + below(6);
        for (size_t i = 0; i < n; ++i) header[below(header.size())] = static_cast<char>(below(256));
        what = "random header bytes";
        return raw_safetensors(header, data);
      }
      case 3:  // rewrite a number
        what = "number edit";
        return raw_safetensors(edit_number(header), data);
      case 4:  // rewrite a string token
        what = "string edit";
        return raw_safetensors(edit_string(header), data);
      case 5:  // structural JSON damage: insert, delete or duplicate a span
        what = "structural edit";
        return raw_safetensors(edit_structure(header), data);
      case 6: {  // bad length field over a valid header
        const uint64_t lens[] = {0, 1, 7, header_len - 1, header_len + 1, header_len + data.size(),
                                 header_len + data.size() + 1, ~0ull, 1ull << 40, rng_()};
        const uint64_t len = lens[below(std::size(lens))];
        what = "length field " + std::to_string(len);
        return raw_safetensors(header, data, len);
      }
      case 7:  // semantic edit on the parsed header: stays valid JSON, breaks the contents
        what = "semantic edit";
        return raw_safetensors(edit_semantic(header), data);
      default: {  // several edits at once
        std::string h = header;
        for (int i = 0; i < 3; ++i) h = below(2) ? edit_number(h) : edit_string(h);
        what = "combined edits";
        std::string d = data;
        if (below(2)) d.resize(below(d.size() + 8), '\x7f');  // data shorter or longer
        return raw_safetensors(h, d);
      }
    }
  }

  std::string edit_number(std::string s) {
    std::vector<std::pair<size_t, size_t>> runs;  // [begin, end) of digit runs
    for (size_t i = 0; i < s.size();) {
      if (std::isdigit(static_cast<unsigned char>(s[i]))) {
        size_t j = i;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        runs.emplace_back(i, j);
        i = j;
      } else {
        ++i;
      }
    }
    if (runs.empty()) return s;
    static const std::vector<std::string> kNumbers = {
        "0", "1", "-1", "2", "3", "4", "7", "8", "16", "24", "100", "-0", "1.5", "1e3", "1e999",
        "4294967296", "9223372036854775807", "9223372036854775808", "18446744073709551615",
        "18446744073709551616", "99999999999999999999999", "\"5\"", "null", "[]"};
    const auto [b, e] = pick(runs);
    const std::string repl = below(3) ? pick(kNumbers) : std::to_string(below(200));
    return s.replace(b, e - b, repl);
  }

  std::string edit_string(std::string s) {
    std::vector<std::pair<size_t, size_t>> strs;  // contents of "..." (no escapes in our headers)
    for (size_t i = s.find('"'); i != std::string::npos;) {
      const size_t j = s.find('"', i + 1);
      if (j == std::string::npos) break;
      strs.emplace_back(i + 1, j);
      i = s.find('"', j + 1);
    }
    if (strs.empty()) return s;
    static const std::vector<std::string> kStrings = {
        "F32", "BF16", "F16", "F64", "I64", "I32", "I8", "U8", "BOOL", "F8_E4M3", "F8_E8M0FNU", "F4", "XX", "",
        "shape", "dtype", "data_offsets", "__metadata__", "emb", "norm", "ids", "\\u0000", "\\ud800"};
    const auto [b, e] = pick(strs);
    return s.replace(b, e - b, pick(kStrings));
  }

  // Edits that keep the JSON well-formed so they reach the per-tensor checks: borrowed or shifted
  // offsets (overlaps, out of range), changed dims and dtypes, dropped keys, wrong value types.
  std::string edit_semantic(const std::string& s) {
    nlohmann::json h = nlohmann::json::parse(s);
    std::vector<std::string> names;
    for (const auto& [k, v] : h.items())
      if (k != "__metadata__") names.push_back(k);
    nlohmann::json& t = h[pick(names)];
    const nlohmann::json& other = h[pick(names)];
    static const std::vector<nlohmann::json> kOdd = {nullptr, -1, 1.5, "x", nlohmann::json::array(),
                                                     nlohmann::json::object(), true, ~0ull};
    switch (below(6)) {
      case 0: t["data_offsets"] = other["data_offsets"]; break;
      case 1: t["data_offsets"][below(2)] = t["data_offsets"][below(2)].get<uint64_t>() + below(9) - 4; break;
      case 2:
        if (!t["shape"].empty()) t["shape"][below(t["shape"].size())] = below(10);
        break;
      case 3: t["dtype"] = pick(std::vector<std::string>{"F32", "BF16", "F16", "I64", "I8", "U8", "F8_E4M3", "F4", "??"}); break;
      case 4: t.erase(pick(std::vector<std::string>{"dtype", "shape", "data_offsets"})); break;
      default: t[pick(std::vector<std::string>{"dtype", "shape", "data_offsets"})] = pick(kOdd); break;
    }
    return h.dump();
  }

  std::string edit_structure(std::string s) {
    static const std::vector<std::string> kBits = {"{", "}", "[", "]", ",", ":", "\"", "0", "-", " ", "\\", "{}",
                                                   "[]", "null", "true", "\x80", std::string(1, '\0')};
    const size_t pos = below(s.size() + 1);
    switch (below(3)) {
      case 0: return s.insert(pos, pick(kBits));
      case 1: return s.erase(pos, 1 + below(8));
      default: {
        const size_t len = below(s.size() - pos + 1);
        return s.insert(below(s.size() + 1), s.substr(pos, len));
      }
    }
  }

  static uint64_t read_len(const std::string& f) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(f[i]);
    return n;
  }

 private:
  std::mt19937_64 rng_;
};

// Opens and reads everything the file claims to hold. Successful reads are cross-checked against
// the bytes we wrote, so a wrong offset computation can't hide behind "it didn't crash".
void exercise_file(const std::filesystem::path& path, const std::string& content) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  const uint64_t data_start = 8 + Mutator::read_len(content);
  for (const auto& [name, t] : f.tensors()) {
    const auto view = f.bytes(t);
    ASSERT_LE(data_start + t.end, content.size()) << name;
    ASSERT_EQ(view.size(), t.end - t.begin) << name;
    if (!view.empty()) {
      ASSERT_EQ(std::memcmp(view.data(), content.data() + data_start + t.begin, view.size()), 0) << name;
    }
  }
}

void exercise_checkpoint(const std::filesystem::path& dir) {
  const Checkpoint ck = Checkpoint::open(dir);
  for (const std::string& name : ck.names()) {
    const TensorInfo* t = ck.find(name);
    ASSERT_NE(t, nullptr) << name;
    const size_t numel = static_cast<size_t>(t->numel());
    // Try both readers with the right shape (one will usually reject the dtype), then a wrong shape.
    try {
      ASSERT_EQ(ck.read_f32(name, t->shape).size(), numel);
    } catch (const Error&) {
    }
    try {
      ASSERT_EQ(ck.read_i64(name, t->shape).size(), numel);
    } catch (const Error&) {
    }
    std::vector<int64_t> wrong = t->shape;
    wrong.push_back(1);
    EXPECT_THROW(ck.read_f32(name, wrong), Error);
  }
}

// Runs `body`; frank::Error counts as a clean rejection, anything else fails the test.
template <typename F>
void expect_ok_or_frank_error(F&& body, const std::string& ctx, int& ok, int& rejected) {
  try {
    body();
    ++ok;
  } catch (const Error&) {
    ++rejected;
  } catch (const std::exception& e) {
    ADD_FAILURE() << ctx << ": non-frank exception " << typeid(e).name() << ": " << e.what();
  } catch (...) {
    ADD_FAILURE() << ctx << ": unknown exception";
  }
}

TEST(SafetensorsFuzz, MutatedFilesOpenOrThrowFrankError) {
  TempDir dir;
  const std::string base = base_file();
  Mutator m(0x5AFE7E45);
  int ok = 0, rejected = 0;
  for (int i = 0; i < kFileMutations && !HasFailure(); ++i) {
    std::string what;
    const std::string bytes = m.mutate(base, what);
    write_file(dir / "model.safetensors", bytes);
    const std::string ctx = "iteration " + std::to_string(i) + " (" + what + ")";
    SCOPED_TRACE(ctx);
    expect_ok_or_frank_error([&] { exercise_file(dir / "model.safetensors", bytes); }, ctx, ok, rejected);
    expect_ok_or_frank_error([&] { exercise_checkpoint(dir.path()); }, ctx, ok, rejected);
  }
  // Both outcomes must occur, or the mutations aren't reaching the interesting code.
  EXPECT_GT(ok, kFileMutations / 20);
  EXPECT_GT(rejected, kFileMutations / 2);
}

TEST(SafetensorsFuzz, MutatedIndexOpensOrThrowsFrankError) {
  TempDir dir;
  write_file(dir / "s1.safetensors", build_safetensors({{"a", "F32", {1}, to_bytes(std::vector<float>{1})}}));
  write_file(dir / "s2.safetensors", build_safetensors({{"b", "I32", {1}, to_bytes(std::vector<int32_t>{2})}}));
  const std::string index = R"({"metadata":{"total_size":8},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})";
  Mutator m(0x1DE8);
  int ok = 0, rejected = 0;
  for (int i = 0; i < kIndexMutations && !HasFailure(); ++i) {
    std::string text;
    switch (m.below(3)) {
      case 0: text = m.edit_string(index); break;
      case 1: text = m.edit_structure(index); break;
      default: text = index.substr(0, m.below(index.size())); break;
    }
    write_file(dir / "model.safetensors.index.json", text);
    const std::string ctx = "index iteration " + std::to_string(i) + ": " + text;
    SCOPED_TRACE(ctx);
    expect_ok_or_frank_error([&] { exercise_checkpoint(dir.path()); }, ctx, ok, rejected);
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(rejected, kIndexMutations / 2);
}

}  // namespace
}  // namespace frank::model
