#include "frank/model/safetensors_writer.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "frank/core/error.h"

namespace frank::model {

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<int64_t> shape, Fill fill) {
  const size_t element = dtype_size(dtype);
  if (element == 0)
    throw Error(fmt::format("safetensors writer: tensor '{}' has dtype {}, which is not written element-wise", name,
                            dtype_name(dtype)));
  size_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(fmt::format("safetensors writer: tensor '{}' has a negative dimension", name));
    count *= static_cast<size_t>(d);
  }
  tensors_.push_back({std::move(name), dtype, std::move(shape), count * element, std::move(fill)});
}

void SafetensorsWriter::write(const std::filesystem::path& path) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  for (const Entry& t : tensors_) {
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(fmt::format("cannot open '{}' for writing", path.string()));
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xFF);
  out.write(length, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<std::byte> bytes;
  for (const Entry& t : tensors_) {
    bytes.clear();
    t.fill(bytes);
    if (bytes.size() != t.bytes)
      throw Error(fmt::format("safetensors writer: tensor '{}' gave {} bytes for {}", t.name, bytes.size(), t.bytes));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  if (!out) throw Error(fmt::format("writing '{}' failed", path.string()));
}

}  // namespace frank::model
