#include "frank/cuda/device_sessions.h"

#include "frank/core/error.h"
#include "frank/cuda/session_transfer.h"

namespace frank::cuda {
namespace {

class OnDevice : public engine::BackendSession {
 public:
  OnDevice(CudaModel& model, DeviceSession session) : model_(model), session_(std::move(session)) {}
  Tensor forward(std::span<const int32_t> ids, Tensor* streams) override {
    if (streams != nullptr) throw Error("the CUDA backend does not return residual streams (no speculative decoding)");
    return model_.forward(session_, ids, engine::Model::Logits::Last);
  }
  int64_t position() const override { return session_.position; }
  engine::SessionCheckpoint checkpoint() const override { return download_checkpoint(model_, session_); }
  engine::Session to_host() const override { return download_session(model_, session_); }

 private:
  CudaModel& model_;
  DeviceSession session_;
};

}  // namespace

std::unique_ptr<engine::BackendSession> DeviceSessions::fresh() {
  return std::make_unique<OnDevice>(model_, model_.new_session(kv_));
}

std::unique_ptr<engine::BackendSession> DeviceSessions::resume(engine::Session state) {
  return std::make_unique<OnDevice>(model_, upload_session(model_, state, kv_));
}

}  // namespace frank::cuda
