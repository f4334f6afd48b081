#pragma once
// Shared by the CUDA V4.1 tests: loading a V4.1 fixture's model.
#include <filesystem>

#include "frank/model/loader_v41.h"

namespace frank::test {

// The fixtures carry the Engram token map and multipliers in reference.safetensors.
inline model::LoadedV41Model load_v41(const std::filesystem::path& dir) {
  return model::load_v41_model(dir, dir / "reference.safetensors");
}

}  // namespace frank::test
