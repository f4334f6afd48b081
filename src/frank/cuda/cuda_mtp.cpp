#include "frank/cuda/cuda_mtp.h"

#include "frank/engine/mtp_forward.h"

namespace frank::cuda {

CudaMtpBlock::CudaMtpBlock(CudaModel& model)
    : model_(model),
      block_(model.model().config(), model.model().weights(), model.model().main_rope(),
             model.model().compress_rope()) {}

CudaMtpState CudaMtpBlock::new_state() const {
  CudaMtpState s;
  s.position_at = DeviceArray<int64_t>({1}, model_.stream());
  s.layer = new_layer_state(block_.config(), KvFormat::F32, model_.stream());
  return s;
}

DeviceArray<float> CudaMtpBlock::forward(CudaMtpState& state, DeviceArray<float>& streams,
                                         const CudaOps::Ids& next_tokens) const {
  const int64_t n = next_tokens.device.numel();
  // Drafts chained on the device have no host copy of their ids (CudaOps reads only the device's).
  block_.check_input(streams.rows(), streams.cols(), n, next_tokens.host);
  if (!next_tokens.host.empty() && std::ssize(next_tokens.host) != n)
    throw Error("MTP: the host and device copies of the next tokens differ in length");
  // Stream-ordered: kernels of an earlier call still reading the position run before this write.
  state.position_at.copy_from_host(&state.position);
  CudaOps ops(model_.device_weights(), model_.stream(), {state.position_at.data(), state.position + n});
  DeviceArray<float> logits =
      engine::mtp_forward(ops, block_.config(), block_.weights(), block_.mtp_weights(), block_.attention(), streams,
                          state.position, state.layer, next_tokens);
  state.position += n;
  return logits;
}

}  // namespace frank::cuda
