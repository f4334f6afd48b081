#pragma once
// V4.1's DSpark drafter on the GPU: the same model code as engine::DSpark (engine/dspark_forward.h:
// the context, the backbone and the Markov chain) over CudaV41Ops, the context rings in device
// memory (DeviceDSparkState) and the weights found in the CudaV41Model's DeviceWeights, issued on
// its stream (so features its target wrote there are read after they are written). The drafts are
// chosen on the device; only the B draft ids and B confidence logits cross to the host.
#include <cstdint>
#include <vector>

#include "frank/cuda/cuda_ops_v41.h"
#include "frank/cuda/cuda_v41_model.h"

namespace frank::cuda {

struct CudaDSparkDraft {
  DeviceArray<float> logits;      // [B, vocab], Markov term included
  std::vector<int32_t> tokens;    // d_1 .. d_B
  std::vector<float> confidence;  // [B]
};

class CudaDSpark {
 public:
  // Throws frank::Error when the model has no DSpark weights. `model` must outlive it.
  explicit CudaDSpark(CudaV41Model& model);

  const model::DSparkConfig& config() const { return *model_.model().config().dspark; }
  DeviceDSparkState new_state() const;
  // The context rows of `features` [n, n_targets * hidden] (device; positions state.position ..).
  void observe(DeviceDSparkState& state, const DeviceArray<float>& features) const;
  // The block [first, noise ...] at positions state.position .. and its greedy drafts (waits for
  // the stream: the drafts and confidences are downloaded).
  CudaDSparkDraft draft(const DeviceDSparkState& state, int32_t first) const;
  // A copy of rows [0, n) of x, on the model's stream.
  DeviceArray<float> first_rows(const DeviceArray<float>& x, int64_t n) const;

 private:
  // Ops for a call of n rows from `position`, which the kernels read from position_at_.
  CudaV41Ops ops_at(int64_t position, int64_t n) const;

  CudaV41Model& model_;
  mutable DeviceArray<int64_t> position_at_;  // [1]
};

}  // namespace frank::cuda
