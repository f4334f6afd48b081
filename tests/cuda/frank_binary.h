#pragma once
// The `frank` binary the CUDA tests start: $FRANK_BINARY, else `frank` beside the test's executable
// (scripts/gpu-check's layout), else the build tree's (FRANK_BUILD_BINARY).
#include <cstdlib>
#include <filesystem>

namespace frank::test {

inline std::filesystem::path frank_binary() {
  if (const char* env = std::getenv("FRANK_BINARY")) return env;
  const std::filesystem::path beside = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "frank";
  if (std::filesystem::exists(beside)) return beside;
  return FRANK_BUILD_BINARY;
}

}  // namespace frank::test
