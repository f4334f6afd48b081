#pragma once
// The backend a command runs a DeepSeek-V4.1 model on: the CPU reference (engine::V41Runner) or,
// with --backend cuda, the GPU (cuda::CudaV41Model, builds with -DFRANK_CUDA=ON).
#include <memory>

#include "frank/engine/session_runner.h"
#include "frank/engine/speculative.h"
#include "frank/engine/v41_model.h"
#include "model_source.h"

namespace frank::cli {

// Speculative decoding on a fresh V4.1 session: the verify target over it and the DSpark drafter
// (dsv41-model.md §8) reading the target's features where the backend computes. The session, when
// the target does not own it, comes first so that it is destroyed last.
struct V41Speculation {
  std::shared_ptr<void> session;
  engine::Speculation on_session;
};

class V41Backend {
 public:
  V41Backend(const engine::V41Model& model, const ModelSource& source);
  ~V41Backend();
  V41Backend(const V41Backend&) = delete;
  V41Backend& operator=(const V41Backend&) = delete;
  // A fresh session on this backend.
  std::unique_ptr<engine::SessionRunner> new_runner();
  // A fresh session and the DSpark drafter on this backend. Throws frank::Error when the
  // checkpoint has no DSpark drafter.
  V41Speculation new_speculation();

 private:
  struct Gpu;
  const engine::V41Model& model_;
  std::unique_ptr<Gpu> gpu_;
};

}  // namespace frank::cli
