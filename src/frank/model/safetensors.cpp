#include "frank/model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "frank/core/error.h"
#include "frank/core/tensor.h"

namespace frank::model {
namespace {

using nlohmann::json;

// Real headers are a few MB at most; anything larger is corruption, and refusing it early
// avoids allocating whatever a garbage length field asks for.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// A JSON integer >= 0 and <= max, or nullopt (floats, negatives, strings, ... all rejected).
// nlohmann stores large positive literals as unsigned, so both representations are handled.
std::optional<uint64_t> as_count(const json& v, uint64_t max) {
  uint64_t u;
  if (v.is_number_unsigned()) {
    u = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    const int64_t s = v.get<int64_t>();
    if (s < 0) return std::nullopt;
    u = static_cast<uint64_t>(s);
  } else {
    return std::nullopt;
  }
  if (u > max) return std::nullopt;
  return u;
}

// Every parse error carries the file path, so messages stay actionable in multi-shard loads.
class HeaderParser {
 public:
  HeaderParser(const std::filesystem::path& path, uint64_t data_size)
      : path_(path.string()), data_size_(data_size) {}

  [[noreturn]] void fail(std::string_view msg) const {
    throw Error(fmt::format("safetensors file '{}': {}", path_, msg));
  }
  [[noreturn]] void fail_tensor(const std::string& name, std::string_view msg) const {
    fail(fmt::format("tensor '{}': {}", name, msg));
  }

  std::map<std::string, std::string> parse_metadata(const json& v) const {
    if (!v.is_object()) fail("\"__metadata__\" must be an object of strings");
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : v.items()) {
      if (!value.is_string()) fail(fmt::format("\"__metadata__\" value for key '{}' is not a string", key));
      out.emplace(key, value.get<std::string>());
    }
    return out;
  }

  TensorInfo parse_tensor(const std::string& name, const json& v) const {
    if (!v.is_object()) fail_tensor(name, "entry is not a JSON object");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!v.contains(key)) fail_tensor(name, fmt::format("missing \"{}\"", key));

    TensorInfo t;
    t.name = name;
    const json& dtype = v.at("dtype");
    if (!dtype.is_string()) fail_tensor(name, "\"dtype\" is not a string");
    t.dtype_name = dtype.get<std::string>();
    t.dtype = parse_dtype(t.dtype_name);

    const json& shape = v.at("shape");
    if (!shape.is_array()) fail_tensor(name, "\"shape\" is not an array");
    uint64_t numel = 1;
    for (const json& d : shape) {
      const auto dim = as_count(d, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
      if (!dim) fail_tensor(name, fmt::format("\"shape\" entry {} is not a non-negative integer", d.dump()));
      t.shape.push_back(static_cast<int64_t>(*dim));
      const auto next = checked_mul(numel, *dim);
      if (!next || *next > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail_tensor(name, "element count overflows int64");
      numel = *next;
    }

    const json& offs = v.at("data_offsets");
    if (!offs.is_array() || offs.size() != 2) fail_tensor(name, "\"data_offsets\" must be [begin, end]");
    const auto begin = as_count(offs.at(0), std::numeric_limits<uint64_t>::max());
    const auto end = as_count(offs.at(1), std::numeric_limits<uint64_t>::max());
    if (!begin || !end) fail_tensor(name, "\"data_offsets\" must be two non-negative integers");
    if (*begin > *end) fail_tensor(name, fmt::format("data_offsets begin {} > end {}", *begin, *end));
    if (*end > data_size_)
      fail_tensor(name, fmt::format("data_offsets end {} is beyond the data section ({} bytes)", *end, data_size_));
    t.begin = *begin;
    t.end = *end;

    // Sub-byte (F4) and unknown dtypes have packing conventions we can't check; the range check
    // above still keeps them inside the file.
    if (const std::size_t elem = dtype_size(t.dtype); elem != 0) {
      const auto want = checked_mul(numel, elem);
      if (!want) fail_tensor(name, "byte size overflows");
      if (*want != t.end - t.begin)
        fail_tensor(name, fmt::format("data_offsets span {} bytes but shape {} of {} needs {} bytes",
                                      t.end - t.begin, shape_string(t.shape), t.dtype_name, *want));
    }
    return t;
  }

  // Tensors may share no bytes; empty tensors occupy nothing and cannot overlap.
  void check_no_overlap(const std::map<std::string, TensorInfo>& tensors) const {
    std::vector<const TensorInfo*> order;
    for (const auto& [_, t] : tensors)
      if (t.begin != t.end) order.push_back(&t);
    std::sort(order.begin(), order.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
    for (std::size_t i = 1; i < order.size(); ++i) {
      const TensorInfo& prev = *order[i - 1];
      const TensorInfo& cur = *order[i];
      if (cur.begin < prev.end)
        fail(fmt::format("tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", prev.name, prev.begin,
                         prev.end, cur.name, cur.begin, cur.end));
    }
  }

 private:
  std::string path_;
  uint64_t data_size_;
};

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      throw Error(fmt::format("tensor '{}': invalid shape (negative dim or element count overflow)", name));
  }
  return n;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile f;
  f.file_ = MappedFile::open(path);
  const std::span<const std::byte> all = f.file_.bytes();
  const auto fail = [&](std::string_view msg) {
    throw Error(fmt::format("safetensors file '{}': {}", path.string(), msg));
  };

  if (all.empty()) fail("file is empty");
  if (all.size() < 8) fail(fmt::format("file is too short ({} bytes) to hold the 8-byte header length", all.size()));

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(all[i]);  // little-endian
  if (header_len > kMaxHeaderBytes)
    fail(fmt::format("header length {} exceeds the {} byte limit (corrupt file?)", header_len, kMaxHeaderBytes));
  if (header_len > all.size() - 8)
    fail(fmt::format("header length {} is larger than the file ({} bytes)", header_len, all.size()));

  const auto* hbeg = reinterpret_cast<const char*>(all.data() + 8);
  f.data_ = all.subspan(8 + header_len);
  const HeaderParser p(path, f.data_.size());

  // nlohmann stops at a NUL as if the input ended, which would silently accept trailing garbage.
  if (const void* nul = std::memchr(hbeg, '\0', header_len))
    p.fail(fmt::format("header is not valid JSON: NUL byte at offset {}", static_cast<const char*>(nul) - hbeg));

  json header;
  try {
    header = json::parse(hbeg, hbeg + header_len);
  } catch (const json::exception& e) {
    p.fail(fmt::format("header is not valid JSON: {}", e.what()));
  }
  if (!header.is_object()) p.fail("header is not a JSON object");

  try {
    for (const auto& [key, value] : header.items()) {
      if (key == "__metadata__") {
        f.metadata_ = p.parse_metadata(value);
      } else {
        f.tensors_.emplace(key, p.parse_tensor(key, value));
      }
    }
  } catch (const json::exception& e) {
    // Defensive: every type is checked before access, but a library error must still surface
    // as frank::Error with the file name.
    p.fail(fmt::format("malformed header: {}", e.what()));
  }
  p.check_no_overlap(f.tensors_);
  return f;
}

std::span<const std::byte> SafetensorsFile::bytes(const TensorInfo& t) const {
  if (t.begin > t.end || t.end > data_.size())
    throw Error(fmt::format("safetensors file '{}': tensor '{}' range [{}, {}) is outside the data section ({} bytes)",
                            path().string(), t.name, t.begin, t.end, data_.size()));
  return data_.subspan(t.begin, t.end - t.begin);
}

}  // namespace frank::model
