#pragma once
// V41Model: the DeepSeek-V4.1 text forward pass on the CPU in fp32 (dsv41-model.md §3-7):
// v41_model_forward (v41_decoder_layer.h) over CpuOps, on explicit session state. A call consumes a
// chunk of tokens at the session's next positions and returns their logits, so full-sequence,
// chunked prefill and one-token decode are one code path.
#include <cstdint>
#include <span>

#include "frank/core/tensor.h"
#include "frank/engine/model.h"
#include "frank/engine/session_runner.h"
#include "frank/engine/v41_attention_forward.h"
#include "frank/engine/v41_session.h"
#include "frank/model/loader_v41.h"

namespace frank::engine {

class V41Model {
 public:
  explicit V41Model(model::LoadedV41Model loaded);
  V41Model(const V41Model&) = delete;
  V41Model& operator=(const V41Model&) = delete;

  const model::V41Config& config() const { return config_; }
  const model::V41Weights& weights() const { return weights_; }
  const model::EngramLayout& engram() const { return engram_; }
  const V41Ropes& ropes() const { return ropes_; }
  V41Session new_session() const { return V41Session(config_, engram_); }

  // Logits [ids.size(), vocab] (or [1, vocab] for Logits::Last) of `ids` at positions
  // session.position ...; advances the session. Throws frank::Error (leaving the session untouched)
  // for ids outside the vocabulary or a sequence longer than max_position_embeddings.
  // `features`, when given, receives DSpark's target features of every one of `ids` (dsv41-model.md
  // §8): [ids.size(), n_targets * hidden], per target layer in config order the mean over the
  // streams entering it after Engram. The logits do not depend on it. Needs config().dspark.
  Tensor forward(V41Session& session, std::span<const int32_t> ids, Model::Logits logits = Model::Logits::All,
                 Tensor* features = nullptr) const;

 private:
  void check_call(int64_t position, std::span<const int32_t> ids) const;

  model::V41Config config_;
  model::V41Weights weights_;
  model::EngramLayout engram_;
  V41Ropes ropes_;
};

// One V4.1 session on the CPU reference, for the commands that feed tokens and read logits.
using V41Runner = ModelRunner<const V41Model>;

}  // namespace frank::engine
