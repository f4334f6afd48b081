#include "frank/engine/v41_model.h"

#include <algorithm>

#include "frank/core/error.h"
#include "frank/engine/cpu_ops.h"
#include "frank/engine/v41_decoder_layer.h"

namespace frank::engine {

V41Model::V41Model(model::LoadedV41Model loaded)
    : config_(std::move(loaded.config)),
      weights_(std::move(loaded.weights)),
      engram_(std::move(loaded.engram)),
      ropes_{RopeTable(config_.rope_main, config_.rope_dim), RopeTable(config_.rope_compress, config_.rope_dim)} {}

void V41Model::check_call(int64_t position, std::span<const int32_t> ids) const {
  engine::check_call(config_, position, ids);
}

Tensor V41Model::forward(V41Session& session, std::span<const int32_t> ids, Model::Logits logits,
                         Tensor* features) const {
  check_call(session.position, ids);
  if (session.windows.size() != static_cast<size_t>(config_.num_layers))
    throw Error("session was made for a different model");
  if (features != nullptr && !config_.dspark) throw Error("the model has no DSpark drafter to read features for");
  const int64_t n = static_cast<int64_t>(ids.size());
  CpuOps ops;
  const std::vector<int32_t> tokens(ids.begin(), ids.end());
  const int64_t D = config_.hidden_size;
  if (features != nullptr)
    *features = Tensor({n, D * static_cast<int64_t>(config_.dspark->target_layers.size())});
  // Each target layer's stream mean goes to its column block of the features.
  auto tap = [&](int layer, const Tensor& streams) {
    if (features == nullptr) return;
    const auto& targets = config_.dspark->target_layers;
    for (size_t k = 0; k < targets.size(); ++k) {
      if (targets[k] != layer) continue;
      const Tensor mean = ops.stream_mean(streams, config_);
      for (int64_t t = 0; t < n; ++t) std::copy_n(mean.row(t), D, features->row(t) + static_cast<int64_t>(k) * D);
    }
  };
  Tensor out = v41_model_forward(ops, config_, weights_, engram_, ropes_, session, tokens, session.position,
                                 logits == Model::Logits::Last ? n - 1 : 0, tap);
  // v41_rewind cannot undo a call longer than the window (its rows overwrote each other in the
  // rings), so the raw projections it would replay are not kept for one.
  if (n > config_.sliding_window)
    for (auto& source : session.sources)
      if (source) source->last_call = {};
  session.position += n;
  return out;
}

}  // namespace frank::engine
