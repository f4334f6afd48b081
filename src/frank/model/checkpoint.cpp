#include "frank/model/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <span>
#include <system_error>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "frank/core/error.h"
#include "frank/core/tensor.h"

namespace frank::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

json read_json_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot read '{}'", path.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    throw Error(fmt::format("index file '{}' is not valid JSON: {}", path.string(), e.what()));
  }
}

// Loads a little-endian value of type T from possibly unaligned bytes (offsets in a safetensors
// file are arbitrary, so the data may not be aligned for T).
template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

Checkpoint Checkpoint::open_file(const fs::path& file) {
  Checkpoint ck;
  ck.dir_ = file;
  ck.files_.push_back(SafetensorsFile::open(file));
  for (const auto& [name, _] : ck.files_[0].tensors()) ck.where_.emplace(name, 0);
  return ck;
}

Checkpoint Checkpoint::open(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw Error(fmt::format("checkpoint directory '{}' does not exist", dir.string()));
  if (!fs::is_directory(dir, ec)) throw Error(fmt::format("checkpoint path '{}' is not a directory", dir.string()));

  Checkpoint ck;
  ck.dir_ = dir;
  // Each shard is opened (mapped and header-parsed) once, however many tensors it holds.
  std::map<std::string, std::size_t> shard_index;  // file name -> index into ck.files_
  const auto open_shard = [&](const std::string& file) {
    const auto [it, inserted] = shard_index.emplace(file, ck.files_.size());
    if (inserted) ck.files_.push_back(SafetensorsFile::open(dir / file));
    return it->second;
  };

  const fs::path index_path = dir / kIndexName;
  if (fs::exists(index_path, ec)) {
    const json index = read_json_file(index_path);
    if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
      throw Error(fmt::format("index file '{}' has no \"weight_map\" object", index_path.string()));
    const json& map = index.at("weight_map");
    if (map.empty()) throw Error(fmt::format("index file '{}' has an empty \"weight_map\"", index_path.string()));
    for (const auto& [name, shard_json] : map.items()) {
      if (!shard_json.is_string())
        throw Error(fmt::format("index file '{}': shard for tensor '{}' is not a string", index_path.string(), name));
      const std::string shard = shard_json.get<std::string>();
      // Shards live next to the index; an absolute or empty name is a broken index, not a path to follow.
      if (shard.empty() || fs::path(shard).is_absolute())
        throw Error(fmt::format("index file '{}': invalid shard name '{}' for tensor '{}'", index_path.string(),
                                shard, name));
      if (shard_index.count(shard) == 0 && !fs::is_regular_file(dir / shard, ec))
        throw Error(fmt::format("shard '{}' listed in index file '{}' does not exist", shard, index_path.string()));
      const std::size_t i = open_shard(shard);
      if (ck.files_[i].tensors().count(name) == 0)
        throw Error(fmt::format("tensor '{}' is listed in index file '{}' for shard '{}' but is not in that shard",
                                name, index_path.string(), shard));
      ck.where_.emplace(name, i);
    }
    return ck;
  }

  std::vector<std::string> files;
  if (fs::is_regular_file(dir / kSingleName, ec)) {
    files.push_back(kSingleName);
  } else {
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().extension() == ".safetensors" && entry.is_regular_file(ec))
        files.push_back(entry.path().filename().string());
    if (ec) throw Error(fmt::format("cannot list checkpoint directory '{}': {}", dir.string(), ec.message()));
    std::sort(files.begin(), files.end());  // deterministic order and error messages
  }
  if (files.empty())
    throw Error(fmt::format("checkpoint directory '{}' contains no .safetensors files", dir.string()));

  for (const std::string& file : files) {
    const std::size_t i = open_shard(file);
    for (const auto& [name, _] : ck.files_[i].tensors()) {
      auto [it, inserted] = ck.where_.emplace(name, i);
      // Without an index nothing says which copy is authoritative, so refuse to guess.
      if (!inserted)
        throw Error(fmt::format("tensor '{}' appears in both '{}' and '{}' in '{}' (and there is no {})", name,
                                ck.files_[it->second].path().filename().string(), file, dir.string(), kIndexName));
    }
  }
  return ck;
}

const TensorInfo* Checkpoint::find(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) return nullptr;
  const auto& tensors = files_[it->second].tensors();
  const auto t = tensors.find(name);
  return t == tensors.end() ? nullptr : &t->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, _] : where_) out.push_back(name);  // std::map iterates sorted
  return out;
}

Checkpoint::Located Checkpoint::locate(const std::string& name, const std::vector<int64_t>& expected_shape) const {
  const TensorInfo* info = find(name);
  if (info == nullptr) throw Error(fmt::format("tensor '{}' not found in checkpoint {}", name, dir_.string()));
  const SafetensorsFile& file = files_[where_.at(name)];
  if (info->shape != expected_shape)
    throw Error(fmt::format("tensor '{}' in '{}' has shape {}, expected {}", name, file.path().string(),
                            shape_string(info->shape), shape_string(expected_shape)));
  return {&file, info};
}

std::vector<float> Checkpoint::read_f32(const std::string& name, const std::vector<int64_t>& expected_shape) const {
  const auto [file, info] = locate(name, expected_shape);
  const DType dt = info->dtype;
  if (dt != DType::F32 && dt != DType::BF16 && dt != DType::F16) {
    // FP4 weights are often stored as packed I8/U8, so those get the same explanation.
    if (is_fp8_or_fp4(dt) || dt == DType::I8 || dt == DType::U8)
      throw Error(fmt::format("tensor '{}' has dtype {}: FP8/FP4 are read for Linear weights only; this tensor "
                              "must be F32, BF16 or F16", name, info->dtype_name));
    throw Error(fmt::format("tensor '{}' has dtype {}: expected a floating-point tensor (F32, BF16 or F16)", name,
                            info->dtype_name));
  }

  const std::span<const std::byte> raw = file->bytes(*info);
  const std::size_t n = static_cast<std::size_t>(info->numel());
  // open() already matched the byte size to the shape; re-check so this loop can never overrun.
  if (raw.size() != n * dtype_size(dt))
    throw Error(fmt::format("tensor '{}' in '{}': byte size {} does not match its shape", name,
                            file->path().string(), raw.size()));
  std::vector<float> out(n);
  if (dt == DType::F32) {
    if (n) std::memcpy(out.data(), raw.data(), raw.size());
  } else {
    const auto widen = dt == DType::BF16 ? bf16_to_f32 : f16_to_f32;
    for (std::size_t i = 0; i < n; ++i) out[i] = widen(load<uint16_t>(raw.data() + 2 * i));
  }
  return out;
}

std::vector<int64_t> Checkpoint::read_i64(const std::string& name, const std::vector<int64_t>& expected_shape) const {
  const auto [file, info] = locate(name, expected_shape);
  const DType dt = info->dtype;
  const std::span<const std::byte> raw = file->bytes(*info);
  const std::size_t n = static_cast<std::size_t>(info->numel());
  const auto convert = [&](auto tag) {
    using T = decltype(tag);
    if (raw.size() != n * sizeof(T))
      throw Error(fmt::format("tensor '{}' in '{}': byte size {} does not match its shape", name,
                              file->path().string(), raw.size()));
    std::vector<int64_t> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      const T v = load<T>(raw.data() + i * sizeof(T));
      if constexpr (std::is_same_v<T, uint64_t>) {
        if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          throw Error(fmt::format("tensor '{}' (U64) element {} = {} does not fit in int64", name, i, v));
      }
      out[i] = static_cast<int64_t>(v);
    }
    return out;
  };
  switch (dt) {
    case DType::I64: return convert(int64_t{});
    case DType::I32: return convert(int32_t{});
    case DType::I16: return convert(int16_t{});
    case DType::I8: return convert(int8_t{});
    case DType::U8: return convert(uint8_t{});
    case DType::U16: return convert(uint16_t{});
    case DType::U32: return convert(uint32_t{});
    case DType::U64: return convert(uint64_t{});
    default:
      throw Error(fmt::format("tensor '{}' has dtype {}: expected an integer tensor (I64, I32, I16, I8, U8, U16, "
                              "U32 or U64)", name, info->dtype_name));
  }
}

std::span<const std::byte> Checkpoint::read_raw(const std::string& name, const std::vector<int64_t>& expected_shape,
                                                std::initializer_list<DType> accepted, std::size_t element_bytes) const {
  const auto [file, info] = locate(name, expected_shape);
  if (std::find(accepted.begin(), accepted.end(), info->dtype) == accepted.end()) {
    std::string names;
    for (DType t : accepted) names += (names.empty() ? "" : ", ") + std::string(dtype_name(t));
    throw Error(fmt::format("tensor '{}' has dtype {}: expected {}", name, info->dtype_name, names));
  }
  const std::span<const std::byte> raw = file->bytes(*info);
  if (raw.size() != static_cast<std::size_t>(info->numel()) * element_bytes)
    throw Error(fmt::format("tensor '{}' in '{}': byte size {} does not match its shape", name,
                            file->path().string(), raw.size()));
  return raw;
}

std::vector<uint8_t> Checkpoint::read_bytes(const std::string& name, const std::vector<int64_t>& expected_shape,
                                            std::initializer_list<DType> accepted) const {
  const std::span<const std::byte> raw = read_raw(name, expected_shape, accepted, 1);
  std::vector<uint8_t> out(raw.size());
  if (!out.empty()) std::memcpy(out.data(), raw.data(), raw.size());
  return out;
}

std::vector<uint16_t> Checkpoint::read_u16(const std::string& name, const std::vector<int64_t>& expected_shape,
                                           std::initializer_list<DType> accepted) const {
  const std::span<const std::byte> raw = read_raw(name, expected_shape, accepted, 2);
  std::vector<uint16_t> out(raw.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load<uint16_t>(raw.data() + 2 * i);
  return out;
}

}  // namespace frank::model
