#include "frank/engine/dspark.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "frank/core/error.h"
#include "frank/engine/cpu_ops.h"
#include "frank/engine/dspark_forward.h"
#include "frank/engine/sampling.h"

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
  const model::DSparkWeights& w = *model_.weights().dspark;
  const int B = config().block_size, D = c.hidden_size, r = config().markov_rank;
  if (first < 0 || first >= c.vocab_size) throw Error(fmt::format("DSpark: token {} is outside the vocabulary", first));
  CpuOps ops;
  std::vector<int32_t> ids(B, config().noise_token_id);
  ids[0] = first;
  const auto [h, base] = dspark_backbone(ops, c, model_.weights(), model_.ropes(), state, ids);

  DSparkDraft out{Tensor({B, int64_t{c.vocab_size}}), {}, {}};
  int32_t prev = first;
  Tensor joined({1, int64_t{D} + r});  // [h_j ; markov_embed(prev_j)]
  for (int j = 0; j < B; ++j) {
    const Tensor m = ops.embed(w.markov_embed, {prev}, 1);
    const Tensor markov = ops.linear(m, w.markov_head);
    float* logits = out.logits.row(j);
    for (int64_t v = 0; v < c.vocab_size; ++v) logits[v] = base.row(j)[v] + markov.row(0)[v];
    std::copy_n(h.row(j), D, joined.row(0));
    std::copy_n(m.row(0), r, joined.row(0) + D);
    const float z = ops.linear(joined, w.confidence).row(0)[0];
    out.confidence.push_back(1.0f / (1.0f + std::exp(-z)));
    prev = argmax(std::span<const float>(logits, static_cast<size_t>(c.vocab_size)));
    out.tokens.push_back(prev);
  }
  return out;
}

}  // namespace frank::engine
