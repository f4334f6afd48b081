#include "frank/core/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "frank/core/error.h"

namespace frank {
namespace {

// system_category().message() is strerror() without its thread-safety problem.
[[noreturn]] void fail(const std::filesystem::path& path, const char* what, int err) {
  throw Error(fmt::format("cannot {} '{}': {}", what, path.string(),
                          std::system_category().message(err)));
}

// Closes the descriptor on every exit path, including throws.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile MappedFile::open(const std::filesystem::path& path) {
  FdGuard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) fail(path, "open", errno);

  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail(path, "stat", errno);
  // Directories and devices open fine but cannot be mapped meaningfully.
  if (!S_ISREG(st.st_mode)) throw Error(fmt::format("cannot map '{}': not a regular file", path.string()));
  if (st.st_size < 0 || static_cast<std::uintmax_t>(st.st_size) > SIZE_MAX)
    throw Error(fmt::format("cannot map '{}': file size {} is not addressable", path.string(),
                            static_cast<long long>(st.st_size)));

  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<std::size_t>(st.st_size);
  if (m.size_ == 0) return m;  // mmap rejects length 0; an empty view is the honest answer

  void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (p == MAP_FAILED) {
    m.size_ = 0;
    fail(path, "mmap", errno);
  }
  m.data_ = static_cast<const std::byte*>(p);
  return m;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace frank
