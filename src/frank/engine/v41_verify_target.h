#pragma once
// CpuV41VerifyTarget: the DeepSeek-V4.1 CPU reference as speculative decoding's target
// (VerifyTarget): V41Model::forward on one session, a checkpoint of what each verify call will
// overwrite (take_v41_checkpoint) and v41_rewind. It gives no residual streams: V4.1's drafter
// (DSpark, dsv41-model.md §8) reads other features of the target (the mean of the streams entering
// its last layers), which the target keeps for its last call when made `with_features`
// (last_features; DSparkDrafter reads them). A call that asks for streams throws, so a drafter over
// this target must not read host streams (Drafter::reads_host_streams).
#include <cstdint>
#include <span>

#include "frank/core/error.h"
#include "frank/core/tensor.h"
#include "frank/engine/v41_model.h"
#include "frank/engine/v41_rewind.h"
#include "frank/engine/verify_target.h"

namespace frank::engine {

// A V4.1 target's answer to a call that asks for streams (CPU and CUDA targets alike).
inline void refuse_v41_streams(const Tensor* streams) {
  if (streams != nullptr) throw Error("the V4.1 verify target gives no residual streams (no drafter reads them)");
}

class CpuV41VerifyTarget : public VerifyTarget {
 public:
  CpuV41VerifyTarget(const V41Model& model, V41Session& session, bool with_features = false)
      : model_(model), session_(session), with_features_(with_features) {}
  const model::V41Config& config() const override { return model_.config(); }
  int64_t position() const override { return session_.position; }
  int max_verify_tokens() const override { return model_.config().sliding_window; }
  Tensor forward(std::span<const int32_t> ids, Model::Logits logits, Tensor* streams) override {
    refuse_v41_streams(streams);
    features_start_ = session_.position;
    return model_.forward(session_, ids, logits, with_features_ ? &features_ : nullptr);
  }
  Tensor verify(std::span<const int32_t> ids, Tensor* streams) override {
    refuse_v41_streams(streams);
    before_ = take_v41_checkpoint(model_, session_, ids);
    features_start_ = session_.position;
    return model_.forward(session_, ids, Model::Logits::All, with_features_ ? &features_ : nullptr);
  }
  void rewind(int keep) override { v41_rewind(model_, before_, session_, keep); }

  // With features: DSpark's target features [n, n_targets * hidden] of the last call's tokens, from
  // position last_features_start() (a rewind keeps its first rows valid).
  const Tensor& last_features() const { return features_; }
  int64_t last_features_start() const { return features_start_; }

 private:
  const V41Model& model_;
  V41Session& session_;
  V41CallCheckpoint before_;  // what the last verify call overwrote
  bool with_features_;
  Tensor features_;
  int64_t features_start_ = 0;
};

}  // namespace frank::engine
