#include "frank/cuda/cuda_dspark.h"

#include <fmt/format.h>

#include "frank/core/error.h"
#include "frank/engine/dspark_forward.h"

namespace frank::cuda {

CudaDSpark::CudaDSpark(CudaV41Model& model) : model_(model), position_at_({1}, model.stream()) {
  if (!model.model().weights().dspark)
    throw Error("the model's checkpoint has no DSpark drafter (no mtp.* tensors loaded)");
}

DeviceDSparkState CudaDSpark::new_state() const {
  const auto& c = model_.model().config();
  DeviceDSparkState s;
  for (int i = 0; i < config().n_stages; ++i) {
    s.rings.emplace_back(std::vector<int64_t>{c.sliding_window, c.head_dim}, model_.stream());
    s.rings.back().fill_bytes(0);  // as the CPU state's rings start
  }
  return s;
}

CudaV41Ops CudaDSpark::ops_at(int64_t position, int64_t n) const {
  // Stream-ordered: kernels of an earlier call still reading the position run before this write.
  position_at_.copy_from_host(&position);
  return CudaV41Ops(model_.device_weights(), model_.stream(), {position_at_.data(), position + n});
}

void CudaDSpark::observe(DeviceDSparkState& state, const DeviceArray<float>& features) const {
  const auto& c = model_.model().config();
  const int64_t width = int64_t{c.hidden_size} * std::ssize(config().target_layers);
  if (features.cols() != width && !features.empty())
    throw Error(fmt::format("DSpark: features have {} columns, the drafter reads {}", features.cols(), width));
  if (features.empty()) return;
  CudaV41Ops ops = ops_at(state.position, features.rows());
  engine::dspark_context(ops, c, *model_.model().weights().dspark, model_.model().ropes(), features, state);
}

CudaDSparkDraft CudaDSpark::draft(const DeviceDSparkState& state, int32_t first) const {
  const auto& c = model_.model().config();
  if (first < 0 || first >= c.vocab_size) throw Error(fmt::format("DSpark: token {} is outside the vocabulary", first));
  const int B = config().block_size;
  CudaV41Ops ops = ops_at(state.position, B);
  std::vector<int32_t> ids(B, config().noise_token_id);
  ids[0] = first;
  const auto [h, base] =
      engine::dspark_backbone(ops, c, model_.model().weights(), model_.model().ropes(), state, ops.upload_ids(ids));
  engine::DSparkChain<CudaV41Ops> chain =
      engine::dspark_chain(ops, *model_.model().weights().dspark, h, base, ops.upload_ids(std::span(&first, 1)));
  CudaDSparkDraft out{std::move(chain.logits), std::vector<int32_t>(B), {}};
  std::vector<float> z(B);
  chain.tokens.device.copy_to_host(out.tokens.data());
  chain.z.copy_to_host(z.data());
  check(cudaStreamSynchronize(model_.stream()), "DSpark (download drafts)");
  for (float v : z) out.confidence.push_back(engine::dspark_confidence(v));
  return out;
}

DeviceArray<float> CudaDSpark::first_rows(const DeviceArray<float>& x, int64_t n) const {
  return CudaV41Ops(model_.device_weights(), model_.stream(), {position_at_.data(), 0}).rows(x, 0, n);
}

}  // namespace frank::cuda
