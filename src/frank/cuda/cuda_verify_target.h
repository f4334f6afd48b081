#pragma once
// The CUDA backend as speculative decoding's target (engine::VerifyTarget): one device session;
// verify calls are CudaModel::verify steps (graph-captured, at most kGraphTokens tokens) after a
// device checkpoint, and a rewind is the device rollback of device_checkpoint.h. Every call keeps
// a device copy of its streams (device_streams()), which the GPU's MTP drafter reads; they are
// downloaded only when the caller asks for them on the host.
#include <algorithm>
#include <optional>

#include "frank/cuda/device_checkpoint.h"
#include "frank/engine/verify_target.h"

namespace frank::cuda {

class CudaVerifyTarget : public engine::VerifyTarget {
 public:
  // On a session of its own.
  explicit CudaVerifyTarget(CudaModel& model, KvFormat kv = KvFormat::F32)
      : model_(model), owned_(model.new_session(kv)), session_(*owned_) {}
  // On `session`, which outlives it (a server's session, cuda/device_sessions.h).
  CudaVerifyTarget(CudaModel& model, DeviceSession& session) : model_(model), session_(session) {}

  const model::ModelConfig& config() const override { return model_.model().config(); }
  int64_t position() const override { return session_.position; }
  int max_verify_tokens() const override {
    return static_cast<int>(std::min<int64_t>(CudaModel::kGraphTokens, config().sliding_window));
  }
  Tensor forward(std::span<const int32_t> ids, engine::Model::Logits logits, Tensor* streams) override {
    return model_.forward(session_, ids, logits, streams, &device_streams_);
  }
  Tensor verify(std::span<const int32_t> ids, Tensor* streams) override {
    before_ = take_checkpoint(model_, session_, static_cast<int64_t>(ids.size()));
    return model_.verify(session_, ids, streams, &device_streams_);
  }
  void rewind(int keep) override { cuda::rewind(model_, session_, before_, keep); }

  DeviceSession& session() { return session_; }
  // The streams of the last forward or verify call [tokens, hc_mult * hidden] (a rewind keeps
  // them: the kept tokens' rows come first).
  const DeviceArray<float>& device_streams() const { return device_streams_; }

 private:
  CudaModel& model_;
  std::optional<DeviceSession> owned_;
  DeviceSession& session_;
  DeviceCheckpoint before_;  // the session before the last verify call
  DeviceArray<float> device_streams_;
};

}  // namespace frank::cuda
