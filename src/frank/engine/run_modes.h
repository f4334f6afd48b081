#pragma once
// How a token sequence is fed to the model when computing its logits: all at once, a prefill
// followed by one-token decode steps, or fixed-size chunks. All give the same logits up to float
// rounding; comparing them against each other and against transformers tests the session state.
#include <cstdint>
#include <span>
#include <string>

#include "frank/core/tensor.h"
#include "frank/engine/model.h"
#include "frank/engine/session_runner.h"

namespace frank::engine {

struct FeedMode {
  enum class Kind { Full, Incremental, Chunked } kind = Kind::Full;
  int64_t prefill = -1;  // Incremental: tokens in the first call (-1: half the sequence)
  int64_t chunk = 0;     // Chunked: tokens per call
};

// "full", "incremental" or "chunked:N"; throws frank::Error for anything else.
FeedMode parse_feed_mode(const std::string& text);

// Logits [ids.size(), vocab] of `ids` fed to a fresh session (the runner's) in the given way.
Tensor sequence_logits(SessionRunner& fresh, int64_t vocab, std::span<const int32_t> ids, const FeedMode& mode);
// The same on the CPU reference.
Tensor sequence_logits(const Model& model, std::span<const int32_t> ids, const FeedMode& mode);

}  // namespace frank::engine
