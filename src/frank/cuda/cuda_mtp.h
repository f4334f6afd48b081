#pragma once
// The MTP block (engine/mtp_forward.h, dsv4-model.md §7) on the GPU: the same model code as
// engine::MtpBlock over CudaOps, with the block's state (its sliding window ring, fp32 rows) in
// device memory and its weights found in the CudaModel's DeviceWeights. Calls are issued eagerly
// (no CUDA graphs) and nothing here waits for the GPU.
#include <cstdint>
#include <span>

#include "frank/cuda/cuda_model.h"
#include "frank/cuda/cuda_ops.h"
#include "frank/engine/mtp.h"

namespace frank::cuda {

// The block's own state: its window ring and the next slot's position (also in device memory,
// where the kernels read it).
struct CudaMtpState {
  int64_t position = 0;
  DeviceArray<int64_t> position_at;  // [1]
  DeviceLayerState layer;
};

class CudaMtpBlock {
 public:
  // Throws frank::Error when the checkpoint has no MTP block.
  explicit CudaMtpBlock(CudaModel& model);

  CudaMtpState new_state() const;
  // Slots state.position .. +n-1, as engine::MtpBlock::forward: `streams` [n, hc_mult * hidden] are
  // their main-model streams H on entry and the block's output streams X on return; `next_tokens`
  // the tokens after each slot's position. Returns the logits [n, vocab]; advances the state.
  DeviceArray<float> forward(CudaMtpState& state, DeviceArray<float>& streams, const CudaOps::Ids& next_tokens) const;

  const engine::MtpBlock& host() const { return block_; }

 private:
  CudaModel& model_;
  engine::MtpBlock block_;  // the configuration, weights and attention the shared code reads
};

}  // namespace frank::cuda
