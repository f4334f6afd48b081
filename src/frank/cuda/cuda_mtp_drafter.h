#pragma once
// Drafting with the model's own MTP block on the GPU: engine::MtpDrafter's algorithm (catch up on
// the kept positions' main streams, chain the block on its own output streams, undo the chain)
// with the block's state, the main model's streams and the chained slots all in device memory.
// The streams are read where the target left them (CudaVerifyTarget::device_streams: a copy of
// the last call's, so nothing is downloaded); each draft is the argmax of its logits, chosen on the
// device, and only the k drafted ids cross to the host, once per verify step.
#include <cstdint>
#include <span>
#include <vector>

#include "frank/cuda/cuda_mtp.h"
#include "frank/engine/speculative.h"

namespace frank::cuda {

class CudaMtpDrafter : public engine::Drafter {
 public:
  // `target_streams`: the device streams of the target's last call (prefill or verify step), which
  // observe() reads; they must outlive the drafter. Throws frank::Error without an MTP block.
  CudaMtpDrafter(CudaModel& model, const DeviceArray<float>& target_streams);

  bool reads_host_streams() const override { return false; }
  void observe(const Tensor& streams, int64_t first, int64_t rows) override;
  std::vector<engine::Draft> propose(std::span<const int32_t> tokens, int k) override;

 private:
  CudaModel& model_;
  const DeviceArray<float>& target_streams_;
  CudaMtpBlock block_;
  CudaMtpState state_;
  // Main streams of positions streams_first_ .. (the last sliding_window of them: the next slots
  // attend no further back).
  DeviceArray<float> streams_;
  int64_t streams_first_ = 0;
};

}  // namespace frank::cuda
