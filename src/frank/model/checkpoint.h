#pragma once
// A model directory as published on the Hub: either sharded (model.safetensors.index.json maps
// each tensor to its shard), a single model.safetensors, or, as a fallback, every *.safetensors in
// the directory. Each shard is opened (mmapped) once; reads convert to the host types the engine
// uses and check the shape the caller expects, so a wrong checkpoint fails loudly at load time.
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "frank/model/safetensors.h"

namespace frank::model {

class Checkpoint {
 public:
  static Checkpoint open(const std::filesystem::path& dir);  // throws frank::Error
  // One .safetensors file on its own (data shipped next to a model, e.g. Engram hash tables).
  static Checkpoint open_file(const std::filesystem::path& file);

  const std::filesystem::path& dir() const { return dir_; }
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  const TensorInfo* find(const std::string& name) const;  // nullptr if absent
  std::vector<std::string> names() const;                 // sorted

  // F32 / BF16 / F16 widened to fp32. The shape must equal `expected_shape` exactly; any other
  // dtype (FP8, FP4-packed I8/U8, ...) is a frank::Error naming the tensor and dtype (quantized
  // Linear weights are read with read_bytes, linear_loader.h).
  std::vector<float> read_f32(const std::string& name, const std::vector<int64_t>& expected_shape) const;
  // The raw bytes of a tensor with one-byte elements (FP8 values, e8m0 scales, packed FP4), same
  // shape check; its dtype must be one of `accepted`.
  std::vector<uint8_t> read_bytes(const std::string& name, const std::vector<int64_t>& expected_shape,
                                  std::initializer_list<DType> accepted) const;
  // The 16-bit elements of a tensor as stored (EXL3 trellis words, fp16 bits), same checks.
  std::vector<uint16_t> read_u16(const std::string& name, const std::vector<int64_t>& expected_shape,
                                 std::initializer_list<DType> accepted) const;
  // I64 / I32 / I16 / I8 / U8 / U16 / U32 (and U64 values that fit) as int64, same shape check.
  std::vector<int64_t> read_i64(const std::string& name, const std::vector<int64_t>& expected_shape) const;

 private:
  Checkpoint() = default;  // only open() makes one

  struct Located {
    const SafetensorsFile* file;
    const TensorInfo* info;
  };
  // Finds the tensor and checks its shape; throws if absent or mismatched.
  Located locate(const std::string& name, const std::vector<int64_t>& expected_shape) const;
  // The tensor's bytes after the shape, dtype (one of `accepted`) and byte-size checks.
  std::span<const std::byte> read_raw(const std::string& name, const std::vector<int64_t>& expected_shape,
                                      std::initializer_list<DType> accepted, std::size_t element_bytes) const;

  std::filesystem::path dir_;
  std::vector<SafetensorsFile> files_;       // one per shard; vector move keeps elements in place
  std::map<std::string, std::size_t> where_;  // tensor name -> index into files_
};

}  // namespace frank::model
