#pragma once
// CudaV41Model: the DeepSeek-V4.1 text forward pass on the GPU — the same model code as the CPU
// reference (engine::v41_model_forward) over CudaV41Ops, weights resident in device memory, the
// session's state (window rings, KV sources) in device memory. Calls are issued eagerly (no CUDA
// graph yet) and timed with CUDA events. CudaV41Runner is its SessionRunner for `frank logits` and
// `frank generate --backend cuda` on a V4.1 checkpoint.
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

#include "frank/cuda/branch_stream.h"
#include "frank/cuda/cuda_model.h"
#include "frank/cuda/cuda_ops_v41.h"
#include "frank/cuda/device_weights.h"
#include "frank/engine/session_runner.h"
#include "frank/engine/v41_model.h"

namespace frank::cuda {

class CudaV41Model {
 public:
  CudaV41Model(const engine::V41Model& model, WeightType linear_type);
  ~CudaV41Model();
  CudaV41Model(const CudaV41Model&) = delete;
  CudaV41Model& operator=(const CudaV41Model&) = delete;

  DeviceV41Session new_session();
  // As engine::V41Model::forward: logits on the host, [ids.size(), vocab] or [1, vocab] for
  // Logits::Last. Throws frank::Error, leaving the session untouched, for ids the model refuses.
  // `features`, when given, receives DSpark's target features of every one of `ids` in device
  // memory (nothing is downloaded): [ids.size(), n_targets * hidden], per target layer in config
  // order the mean of the streams entering it after Engram; needs config().dspark. A call of at
  // most sliding_window tokens keeps its ratio-2 sources' raw rows (DeviceV41Source::last_call), so
  // that it can be rewound (device_v41_checkpoint.h), as the CPU session does.
  Tensor forward(DeviceV41Session& session, std::span<const int32_t> ids, engine::Model::Logits logits,
                 DeviceArray<float>* features = nullptr);
  // Reindexing layers select with a mask and the plain selection instead of the fused kernel
  // (CudaV41Ops::set_fused_candidates): the two must agree byte for byte.
  void set_fused_candidates(bool on) { fused_candidates_ = on; }
  // The mHC overlap (cuda_ops_v41.h): each site's hc_map on a branch stream while the
  // sublayer runs. Off by default until an A/B test admits it; the logits are the same bit for bit.
  void set_mhc_overlap(bool on) { mhc_overlap_ = on; }

  const engine::V41Model& model() const { return model_; }
  // The stream every call is issued on, and the weights in device memory (the DSpark drafter's
  // too: cuda_dspark.h).
  cudaStream_t stream() const { return stream_; }
  DeviceWeights& device_weights() { return weights_; }
  size_t weight_bytes() const { return weights_.bytes(); }
  const std::vector<StepTime>& step_times() const { return step_times_; }

 private:
  const engine::V41Model& model_;
  cudaStream_t stream_ = nullptr;
  DeviceWeights weights_;
  bool fused_candidates_ = true;
  bool mhc_overlap_ = false;
  BranchStream side_;  // hc_map's stream, with the mHC overlap on
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
  std::vector<StepTime> step_times_;
};

using CudaV41Runner = engine::ModelRunner<CudaV41Model>;

}  // namespace frank::cuda
