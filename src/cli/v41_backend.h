#pragma once
// The backend a command runs a DeepSeek-V4.1 model on: the CPU reference (engine::V41Runner) or,
// with --backend cuda, the GPU (cuda::CudaV41Model, builds with -DFRANK_CUDA=ON).
#include <memory>

#include "frank/engine/session_runner.h"
#include "frank/engine/v41_model.h"
#include "model_source.h"

namespace frank::cli {

class V41Backend {
 public:
  V41Backend(const engine::V41Model& model, const ModelSource& source);
  ~V41Backend();
  V41Backend(const V41Backend&) = delete;
  V41Backend& operator=(const V41Backend&) = delete;
  // A fresh session on this backend.
  std::unique_ptr<engine::SessionRunner> new_runner();

 private:
  struct Gpu;
  const engine::V41Model& model_;
  std::unique_ptr<Gpu> gpu_;
};

}  // namespace frank::cli
