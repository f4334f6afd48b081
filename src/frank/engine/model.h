#pragma once
// Model: the DeepSeek-V4 forward pass, written once over explicit session state. A call consumes
// a chunk of tokens at the session's next positions and returns their logits, so full-sequence,
// chunked prefill and one-token decode are the same code path with different chunk sizes.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/attention.h"
#include "frank/engine/rope.h"
#include "frank/engine/routing_replay.h"
#include "frank/engine/session.h"
#include "frank/engine/session_checkpoint.h"
#include "frank/engine/topk_row_dump.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::engine {

// Throws frank::Error for ids outside the vocabulary or a call that would pass
// max_position_embeddings from `position`: the check every model (V4, V4.1) and backend makes
// before a forward call.
void check_call(const model::CommonConfig& c, int64_t position, std::span<const int32_t> ids);

class Model {
 public:
  Model(model::ModelConfig config, model::ModelWeights weights);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const model::ModelConfig& config() const { return config_; }
  const model::ModelWeights& weights() const { return weights_; }
  const RopeTable& main_rope() const { return main_rope_; }
  const RopeTable& compress_rope() const { return compress_rope_; }
  const std::vector<Attention>& attention() const { return attention_; }
  Session new_session() const { return Session(config_); }
  // Identifies the model (config and a sample of every weight): state saved for one model is
  // never loaded into another.
  const std::string& fingerprint() const { return fingerprint_; }

  // Which positions' logits a call returns: all of them, or only the last one (a prefill that
  // only samples the next token: the vocabulary-wide head is then computed once, not per token).
  enum class Logits { All, Last };

  // Logits [ids.size(), vocab] (or [1, vocab] for Logits::Last) for `ids` at positions
  // session.position ...; advances the session. Throws frank::Error (leaving the session
  // untouched) for ids outside the vocabulary or a sequence longer than max_position_embeddings.
  // `streams_out`, when given, receives the residual streams before the final hyper-head,
  // [ids.size(), hc_mult * hidden]: what the MTP drafter reads.
  Tensor forward(Session& session, std::span<const int32_t> ids, Logits logits = Logits::All,
                 Tensor* streams_out = nullptr) const;

  // Rolls back a speculative step: `after` is `before`'s session after one more forward call of
  // n <= sliding_window tokens; the result is the session as if only the first `keep` of them had
  // been consumed — equal to a session that was fed exactly those tokens. Only the compressors'
  // pooling of the kept tokens runs again (from their recorded projections); nothing of the model
  // is recomputed. The result's last-call record is that of a call of the kept tokens (so it can be
  // rewound again from the same checkpoint, to fewer), with the call's routed experts (all its tokens).
  // Throws frank::Error when `after` is not such a continuation.
  Session rewind(const SessionCheckpoint& before, const Session& after, int64_t keep) const;

  // Throws frank::Error for ids outside the vocabulary or a call that would pass
  // max_position_embeddings from `position` (what every backend checks before a forward call).
  void check_call(int64_t position, std::span<const int32_t> ids) const;

  // Every indexer score row of later forward calls goes to `dump` (null: none). Not thread-safe:
  // for the commands that run one session.
  void dump_topk_rows(TopkRowDump* dump) { topk_dump_ = dump; }
  // Later forward calls route to the experts `replay` gives them (null: the router chooses).
  // Not thread-safe either: the trace's tokens are taken in call order.
  void replay_routing(RoutingReplay* replay) { routing_replay_ = replay; }
  RoutingReplay* routing_replay() const { return routing_replay_; }

 private:

  model::ModelConfig config_;
  model::ModelWeights weights_;
  RopeTable main_rope_, compress_rope_;
  std::vector<Attention> attention_;
  std::string fingerprint_;
  TopkRowDump* topk_dump_ = nullptr;
  RoutingReplay* routing_replay_ = nullptr;
};

}  // namespace frank::engine
