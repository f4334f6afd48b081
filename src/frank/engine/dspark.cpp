#include "frank/engine/dspark.h"

#include <fmt/format.h>

#include "frank/core/error.h"
#include "frank/engine/cpu_ops.h"
#include "frank/engine/dspark_forward.h"

namespace frank::engine {

DSpark::DSpark(const V41Model& model) : model_(model) {
  if (!model.weights().dspark) throw Error("the model's checkpoint has no DSpark drafter (no mtp.* tensors loaded)");
}

DSparkState DSpark::new_state() const {
  const auto& c = model_.config();
  DSparkState s;
  s.rings.assign(config().n_stages, std::vector<float>(int64_t{c.sliding_window} * c.head_dim));
  return s;
}

void DSpark::observe(DSparkState& state, const Tensor& features) const {
  const auto& c = model_.config();
  const int64_t width = int64_t{c.hidden_size} * static_cast<int64_t>(config().target_layers.size());
  if (features.cols() != width)
    throw Error(fmt::format("DSpark: features have {} columns, the drafter reads {}", features.cols(), width));
  CpuOps ops;
  dspark_context(ops, c, *model_.weights().dspark, model_.ropes(), features, state);
}

DSparkDraft DSpark::draft(const DSparkState& state, int32_t first) const {
  const auto& c = model_.config();
  if (first < 0 || first >= c.vocab_size) throw Error(fmt::format("DSpark: token {} is outside the vocabulary", first));
  CpuOps ops;
  std::vector<int32_t> ids(config().block_size, config().noise_token_id);
  ids[0] = first;
  const auto [h, base] = dspark_backbone(ops, c, model_.weights(), model_.ropes(), state, ids);
  DSparkChain<CpuOps> chain = dspark_chain(ops, *model_.weights().dspark, h, base, {first});
  DSparkDraft out{std::move(chain.logits), std::move(chain.tokens), {}};
  for (float z : chain.z.data) out.confidence.push_back(dspark_confidence(z));
  return out;
}

}  // namespace frank::engine
