#pragma once
// VerifyTarget: the main model and one session on some backend, as speculative decoding sees it
// (SpeculativeDecoder): plain calls, verify calls that return every position's logits and the
// residual streams the drafter reads, and a rewind to a prefix of the last verify call. The CPU
// reference is CpuVerifyTarget (V4.1: CpuV41VerifyTarget, v41_verify_target.h); the CUDA backend has
// CudaVerifyTarget (frank/cuda).
#include <cstdint>
#include <span>

#include "frank/core/tensor.h"
#include "frank/engine/model.h"
#include "frank/engine/session_checkpoint.h"

namespace frank::engine {

class VerifyTarget {
 public:
  virtual ~VerifyTarget() = default;
  // What both families share (a target narrows it to its model's config).
  virtual const model::CommonConfig& config() const = 0;
  virtual int64_t position() const = 0;
  // The most tokens one verify call takes (the drafts plus one).
  virtual int max_verify_tokens() const = 0;
  // As Model::forward (a prefill); `streams`, when given, receives the streams before the hyper-head.
  virtual Tensor forward(std::span<const int32_t> ids, Model::Logits logits, Tensor* streams) = 0;
  // A verify call: the logits of every one of `ids` [n, vocab] and, when `streams` is given, their
  // streams [n, hc_mult * hidden]; rewind() can then keep a prefix of it.
  virtual Tensor verify(std::span<const int32_t> ids, Tensor* streams) = 0;
  // The session as if only the first `keep` tokens of the last verify call had been fed (cheap:
  // nothing accepted is recomputed). May follow another rewind of the same call, to fewer.
  virtual void rewind(int keep) = 0;
};

// The CPU reference: Model::forward on `session`, checkpoints and Model::rewind.
class CpuVerifyTarget : public VerifyTarget {
 public:
  CpuVerifyTarget(const Model& model, Session& session) : model_(model), session_(session) {}
  const model::ModelConfig& config() const override { return model_.config(); }
  int64_t position() const override { return session_.position; }
  int max_verify_tokens() const override { return model_.config().sliding_window; }
  Tensor forward(std::span<const int32_t> ids, Model::Logits logits, Tensor* streams) override {
    return model_.forward(session_, ids, logits, streams);
  }
  Tensor verify(std::span<const int32_t> ids, Tensor* streams) override {
    before_ = take_checkpoint(session_);
    return model_.forward(session_, ids, Model::Logits::All, streams);
  }
  void rewind(int keep) override { session_ = model_.rewind(before_, session_, keep); }

 private:
  const Model& model_;
  Session& session_;
  SessionCheckpoint before_;  // the session before the last verify call
};

}  // namespace frank::engine
