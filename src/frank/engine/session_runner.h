#pragma once
// SessionRunner: one session of a model on some backend, as the commands that only feed tokens and
// read logits see it (`frank logits`, `frank generate`). ModelRunner serves the CPU reference's
// models and CUDA's V4.1 model; CUDA's V4 model has its own (frank/cuda/cuda_model.h).
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "frank/core/tensor.h"
#include "frank/engine/model.h"
#include "frank/engine/sampling.h"

namespace frank::engine {

class SessionRunner {
 public:
  virtual ~SessionRunner() = default;
  // Logits of `ids` at the session's next positions, on the host: [ids.size(), vocab], or [1, vocab]
  // for Logits::Last. Throws frank::Error for bad ids, leaving the session as it was.
  virtual Tensor forward(std::span<const int32_t> ids, Model::Logits logits) = 0;
  // The greedy token after `ids` (engine::argmax of the last position's logits). A backend may
  // choose it where the logits are, so that only the token moves.
  virtual int32_t forward_greedy(std::span<const int32_t> ids) {
    const Tensor logits = forward(ids, Model::Logits::Last);
    return argmax(std::span<const float>(logits.row(0), static_cast<size_t>(logits.cols())));
  }
};

// A SessionRunner over one session of `model`, any model with new_session() and
// forward(session, ids, logits): the CPU reference's V4 and V4.1 models, CUDA's V4.1 model.
template <class M>
class ModelRunner : public SessionRunner {
 public:
  explicit ModelRunner(M& model) : model_(model), session_(model.new_session()) {}
  Tensor forward(std::span<const int32_t> ids, Model::Logits logits) override {
    return model_.forward(session_, ids, logits);
  }

 private:
  M& model_;
  decltype(std::declval<M&>().new_session()) session_;
};

using CpuRunner = ModelRunner<const Model>;

}  // namespace frank::engine
