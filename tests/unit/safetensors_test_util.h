#pragma once
// Test helpers shared by the safetensors / checkpoint tests: a self-deleting temp directory and
// builders for safetensors bytes, so every test writes exactly the file it needs.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace frank::test {

class TempDir {
 public:
  TempDir() {
    static std::atomic<unsigned> counter{0};
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("frank_st_test_{}_{}_{:08x}", ::getpid(), counter++, rd());
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Overwrites in place and then sets the size, instead of O_TRUNC: truncating to zero makes the
// filesystem free and reallocate blocks, which costs milliseconds per write on some machines and
// the fuzz test rewrites the same file thousands of times.
inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("test helper: cannot open " + path.string());
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = done == bytes.size() && ::ftruncate(fd, static_cast<off_t>(bytes.size())) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("test helper: cannot write " + path.string());
}

// 8-byte little-endian length + header + data, exactly as the format lays it out.
inline std::string raw_safetensors(const std::string& header, const std::string& data, uint64_t header_len) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header_len >> (8 * i)) & 0xFF);
  return out + header + data;
}
inline std::string raw_safetensors(const std::string& header, const std::string& data = "") {
  return raw_safetensors(header, data, header.size());
}

struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string data;  // raw little-endian bytes
};

// Valid file with tensors packed back to back in the given order.
inline std::string build_safetensors(const std::vector<TensorSpec>& tensors,
                                     const std::map<std::string, std::string>& metadata = {}) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string data;
  for (const TensorSpec& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.data.size()}}};
    data += t.data;
  }
  return raw_safetensors(header.dump(), data);
}

template <typename T>
std::string to_bytes(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// fp32 -> bf16 with round-to-nearest-even (inputs are finite): add 0x7FFF plus the lowest kept
// bit, then truncate, so exact ties go to the even bf16.
inline uint16_t f32_to_bf16_rne(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace frank::test
