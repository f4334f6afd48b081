#pragma once
// CudaModel: an engine::Model's forward pass on the GPU — the same model code (model_forward) over
// CudaOps, weights resident in device memory, the session's state (window rings, compressor
// buffers, compressed entries) in device memory. CudaRunner is its SessionRunner for `frank logits`
// and `frank generate --backend cuda`.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "frank/cuda/cuda_ops.h"
#include "frank/cuda/device_weights.h"
#include "frank/engine/model.h"
#include "frank/engine/session_runner.h"

namespace frank::cuda {

struct DeviceSession {
  int64_t position = 0;
  std::vector<DeviceLayerState> layers;
};

class CudaModel {
 public:
  // `synthetic_seed` seeds the weights a shape-only host model leaves to the device (DeviceWeights).
  CudaModel(const engine::Model& model, WeightType linear_type, uint64_t synthetic_seed = 0);
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  DeviceSession new_session();
  // A session whose state is random, as if `position` tokens had been consumed (window rings,
  // compressor buffers, compressed entries and index keys of the right sizes), with room for
  // `room` more tokens' entries: what a benchmark at context `position` needs without a prefill.
  DeviceSession synthetic_session(int64_t position, int64_t room, uint64_t seed);
  // As engine::Model::forward: logits on the host, [ids.size(), vocab] or [1, vocab] for Logits::Last.
  Tensor forward(DeviceSession& session, std::span<const int32_t> ids, engine::Model::Logits logits);

  const engine::Model& model() const { return model_; }
  size_t weight_bytes() const { return weights_.bytes(); }
  DeviceWeights& device_weights() { return weights_; }
  cudaStream_t stream() const { return stream_; }

 private:
  const engine::Model& model_;
  cudaStream_t stream_ = nullptr;
  DeviceWeights weights_;
};

class CudaRunner : public engine::SessionRunner {
 public:
  explicit CudaRunner(CudaModel& model) : model_(model), session_(model.new_session()) {}
  Tensor forward(std::span<const int32_t> ids, engine::Model::Logits logits) override {
    return model_.forward(session_, ids, logits);
  }

 private:
  CudaModel& model_;
  DeviceSession session_;
};

}  // namespace frank::cuda
