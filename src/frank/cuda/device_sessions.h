#pragma once
// The CUDA backend's sessions for the prefix cache (engine::SessionBackend): each lives in device
// memory (a DeviceSession); checkpoints and the state the prefix cache keeps are downloaded to the
// host layout, and a state resumed from the cache is uploaded (session_transfer.h, exact copies).
// A session speculates as CudaVerifyTarget over it with CudaMtpDrafter (rollback on the device).
#include "frank/cuda/cuda_model.h"
#include "frank/engine/session_backend.h"

namespace frank::cuda {

class DeviceSessions : public engine::SessionBackend {
 public:
  // Sessions store their K=V rows as `kv` records (ops.cuh).
  explicit DeviceSessions(CudaModel& model, KvFormat kv = KvFormat::F32) : model_(model), kv_(kv) {}
  std::unique_ptr<engine::BackendSession> fresh() override;
  std::unique_ptr<engine::BackendSession> resume(engine::Session state) override;

 private:
  CudaModel& model_;
  KvFormat kv_;
};

}  // namespace frank::cuda
