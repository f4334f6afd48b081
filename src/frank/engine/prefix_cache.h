#pragma once
// The prefix ("region") cache: sessions of earlier requests kept with checkpoints, so a request
// that repeats an earlier conversation and adds to it runs only its new tokens.
//
// DeepSeek-V4's compressors carry recurrent state, so a kept session cannot be cut back to any
// prefix; it can resume from its exact end or from a checkpoint (taken at regular positions and
// at message boundaries).
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/model.h"
#include "frank/engine/session_checkpoint.h"

namespace frank::engine {

struct Resume {
  Session session;           // positioned at `reused_tokens`
  int64_t reused_tokens = 0;
  std::vector<SessionCheckpoint> checkpoints;  // the kept checkpoints at or before that point
};

class PrefixCache {
 public:
  explicit PrefixCache(size_t byte_budget) : budget_(byte_budget) {}

  // The longest reusable point for `prompt` that still leaves at least one prompt token to run
  // (its logits start the completion); nullopt when nothing reusable reaches past `beyond` tokens
  // (what another tier already offers).
  std::optional<Resume> resume(std::span<const int32_t> prompt, int64_t beyond = 0);

  // Keeps a finished request: `tokens` are exactly the tokens `session` consumed. A kept
  // conversation that this one extends is replaced; least recently used ones are evicted to stay
  // within the byte budget (a conversation larger than the budget is not kept).
  void store(std::vector<int32_t> tokens, Session session, std::vector<SessionCheckpoint> checkpoints);

  size_t bytes() const;
  size_t conversations() const;
  uint64_t evictions() const;

 private:
  struct Conversation {
    std::vector<int32_t> tokens;
    Session session;
    std::vector<SessionCheckpoint> checkpoints;  // ascending positions
    size_t bytes = 0;
  };

  const size_t budget_;
  mutable std::mutex mutex_;
  std::list<Conversation> lru_;  // most recently used first
  size_t bytes_ = 0;
  uint64_t evictions_ = 0;
};

size_t session_bytes(const Session& session);

// Runs `ids` through the model in chunks that end at each of `checkpoint_positions` (absolute,
// ascending; those outside this run are ignored), taking a checkpoint there. Returns the logits of
// the last token and appends the checkpoints.
Tensor prefill_with_checkpoints(const Model& model, Session& session, std::span<const int32_t> ids,
                                const std::vector<int64_t>& checkpoint_positions,
                                std::vector<SessionCheckpoint>& checkpoints);

}  // namespace frank::engine
