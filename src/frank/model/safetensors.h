#pragma once
// Reader for one .safetensors file: an 8-byte little-endian header length, a JSON header that
// maps tensor names to {dtype, shape, data_offsets}, then the raw data section.
// open() validates the whole header up front so that later reads can trust every offset:
// a corrupt or hostile file produces a frank::Error, never an out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "frank/core/dtype.h"
#include "frank/core/mmap_file.h"

namespace frank::model {

struct TensorInfo {
  std::string name;
  DType dtype = DType::Unknown;
  std::string dtype_name;  // as written in the header (may be an alias or an unknown name)
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets relative to the data section

  // Product of the dims (1 for a scalar). Throws frank::Error on overflow or a negative dim.
  int64_t numel() const;
};


class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);  // throws frank::Error

  const std::filesystem::path& path() const { return file_.path(); }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }  // "__metadata__"

  // View of the tensor's bytes inside the mapping (valid while this object lives). Bounds are
  // re-checked so a TensorInfo from another file cannot read outside the mapping.
  std::span<const std::byte> bytes(const TensorInfo& t) const;

 private:
  SafetensorsFile() = default;  // only open() makes one, so every instance is validated

  MappedFile file_;
  std::span<const std::byte> data_;  // the data section, after the header
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace frank::model
