#include "frank/engine/session_backend.h"

#include "frank/engine/mtp_drafter.h"

namespace frank::engine {
namespace {

class HostSession : public BackendSession {
 public:
  HostSession(const Model& model, Session state) : model_(model), session_(std::move(state)) {}
  Tensor forward(std::span<const int32_t> ids) override { return model_.forward(session_, ids, Model::Logits::Last); }
  int64_t position() const override { return session_.position; }
  SessionCheckpoint checkpoint() const override { return take_checkpoint(session_); }
  Session to_host() const override { return session_; }
  Session release_to_host() override { return std::move(session_); }
  Speculation speculation() override {
    return {std::make_unique<CpuVerifyTarget>(model_, session_), std::make_unique<MtpDrafter>(model_)};
  }
  Session* host_session() override { return &session_; }

 private:
  const Model& model_;
  Session session_;
};

}  // namespace

std::unique_ptr<BackendSession> HostSessions::fresh() {
  return std::make_unique<HostSession>(model_, model_.new_session());
}

std::unique_ptr<BackendSession> HostSessions::resume(Session state) {
  return std::make_unique<HostSession>(model_, std::move(state));
}

}  // namespace frank::engine
