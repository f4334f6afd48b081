#include "frank/cuda/device_sessions.h"

#include "frank/cuda/cuda_mtp_drafter.h"
#include "frank/cuda/cuda_verify_target.h"
#include "frank/cuda/session_transfer.h"

namespace frank::cuda {
namespace {

class OnDevice : public engine::BackendSession {
 public:
  OnDevice(CudaModel& model, DeviceSession session) : model_(model), session_(std::move(session)) {}
  Tensor forward(std::span<const int32_t> ids) override {
    return model_.forward(session_, ids, engine::Model::Logits::Last);
  }
  int64_t position() const override { return session_.position; }
  engine::SessionCheckpoint checkpoint() const override { return download_checkpoint(model_, session_); }
  engine::Session to_host() const override { return download_session(model_, session_); }
  // The drafter reads the streams the target's calls leave in device memory: nothing is downloaded
  // but logits and drafted ids.
  engine::Speculation speculation() override {
    auto target = std::make_unique<CudaVerifyTarget>(model_, session_);
    auto drafter = std::make_unique<CudaMtpDrafter>(model_, target->device_streams());
    return {std::move(target), std::move(drafter)};
  }

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
