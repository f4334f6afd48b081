#pragma once
// Writes one .safetensors file tensor by tensor: the header is laid out from the declared names,
// dtypes and shapes first, then each tensor's bytes are produced and written in turn, so a file of
// many gigabytes (a synthetic full-size pack) never has to be in memory at once.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "frank/core/dtype.h"

namespace frank::model {

class SafetensorsWriter {
 public:
  // Fills exactly the tensor's byte size (little-endian elements, row-major).
  using Fill = std::function<void(std::vector<std::byte>& out)>;

  // Sub-byte dtypes (F4) and Unknown are refused.
  void add(std::string name, DType dtype, std::vector<int64_t> shape, Fill fill);
  // Writes the file; throws frank::Error when it cannot, or when a fill gives the wrong byte count.
  void write(const std::filesystem::path& path) const;
  bool empty() const { return tensors_.empty(); }

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    size_t bytes;
    Fill fill;
  };
  std::vector<Entry> tensors_;
};

}  // namespace frank::model
