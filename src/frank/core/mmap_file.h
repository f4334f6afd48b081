#pragma once
// Read-only memory map of a whole file. Checkpoints are many GB, so tensors are viewed in place
// instead of copied; the OS pages data in on first touch. Move-only: exactly one owner unmaps.
#include <cstddef>
#include <filesystem>
#include <span>

namespace frank {

class MappedFile {
 public:
  // Maps `path` with PROT_READ / MAP_PRIVATE and closes the descriptor right away (the mapping
  // keeps the file alive). Empty files are allowed and give an empty view.
  // Throws frank::Error naming the path and the OS reason.
  static MappedFile open(const std::filesystem::path& path);

  MappedFile() noexcept = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::filesystem::path& path() const noexcept { return path_; }
  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  std::size_t size() const noexcept { return size_; }

 private:
  void reset() noexcept;

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace frank
