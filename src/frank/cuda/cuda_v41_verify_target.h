#pragma once
// CudaV41VerifyTarget: the DeepSeek-V4.1 CUDA backend as speculative decoding's target
// (engine::VerifyTarget), CpuV41VerifyTarget's device twin: CudaV41Model::forward on one device
// session, a device checkpoint of what each verify call will overwrite and its exact rewind
// (device_v41_checkpoint.h). It gives no residual streams (V4.1's DSpark drafter reads other
// features, dsv41-model.md §8); made `with_features`, it keeps the last call's target features in
// device memory for a GPU drafter (DeviceFeatureSource), downloading nothing.
#include <cstdint>
#include <optional>
#include <span>

#include "frank/cuda/cuda_v41_model.h"
#include "frank/cuda/device_features.h"
#include "frank/cuda/device_v41_checkpoint.h"
#include "frank/engine/v41_verify_target.h"
#include "frank/engine/verify_target.h"

namespace frank::cuda {

class CudaV41VerifyTarget : public engine::VerifyTarget, public DeviceFeatureSource {
 public:
  // On a session of its own.
  explicit CudaV41VerifyTarget(CudaV41Model& model, bool with_features = false)
      : model_(model), owned_(model.new_session()), session_(*owned_), with_features_(with_features) {}
  // On `session`, which outlives it.
  CudaV41VerifyTarget(CudaV41Model& model, DeviceV41Session& session, bool with_features = false)
      : model_(model), session_(session), with_features_(with_features) {}

  const model::V41Config& config() const override { return model_.model().config(); }
  int64_t position() const override { return session_.position; }
  // As the CPU target's: the device forward takes calls of any length, the rewind one of the window.
  int max_verify_tokens() const override { return config().sliding_window; }
  Tensor forward(std::span<const int32_t> ids, engine::Model::Logits logits, Tensor* streams) override {
    engine::refuse_v41_streams(streams);
    features_start_ = session_.position;
    return model_.forward(session_, ids, logits, with_features_ ? &features_ : nullptr);
  }
  Tensor verify(std::span<const int32_t> ids, Tensor* streams) override {
    engine::refuse_v41_streams(streams);
    before_ = take_v41_checkpoint(model_, session_, ids);
    features_start_ = session_.position;
    return model_.forward(session_, ids, engine::Model::Logits::All, with_features_ ? &features_ : nullptr);
  }
  void rewind(int keep) override { v41_rewind(model_, before_, session_, keep); }

  // With features: DSpark's target features [n, n_targets * hidden] of the last call's tokens, from
  // position last_features_start() (a rewind keeps its first rows valid).
  const DeviceArray<float>& device_features() const override { return features_; }
  int64_t last_features_start() const override { return features_start_; }

  DeviceV41Session& session() { return session_; }

 private:
  CudaV41Model& model_;
  std::optional<DeviceV41Session> owned_;
  DeviceV41Session& session_;
  DeviceV41Checkpoint before_;  // what the last verify call overwrote
  bool with_features_;
  DeviceArray<float> features_;
  int64_t features_start_ = 0;
};

}  // namespace frank::cuda
