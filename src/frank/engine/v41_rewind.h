#pragma once
// Rolling back a DeepSeek-V4.1 verify call on the CPU reference (dsv41-model.md §8 "Verify"): after
// a forward call of n <= sliding_window tokens, the session as if only the first `keep` of them had
// been fed, without recomputing anything of the model. What the call changed is
//  - appended (each KV source's compressed entries and indexer keys): cut back to the groups the
//    kept tokens close;
//  - overwritten (every layer's window-ring rows at the call's positions, each ratio-2 source's open
//    group, the Engram look-back): restored from a record taken before the call, which holds only
//    those n ring rows per layer, the open groups (< ratio rows) and the look-back;
//  - consumed into a group the call closed: a kept prefix that ends inside a ratio-2 group gets its
//    open rows back from the call's raw projections (V41SourceState::last_call).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/engram.h"
#include "frank/engine/v41_model.h"
#include "frank/engine/v41_session.h"

namespace frank::engine {

// A KV source just before the call: its open group, and its entry count (entries only grow).
struct V41SourceMark {
  std::vector<float> pending_kv, pending_gate;
  int pending = 0;
  int64_t pending_position = 0;
  int64_t n_entries = 0;
};

// A session just before a forward call of `ids`: what that call will overwrite, and the counts of
// what it only appends.
struct V41CallCheckpoint {
  int64_t position = 0;
  std::vector<int32_t> ids;         // the call's tokens: the Engram look-back of a kept prefix
  std::vector<Tensor> window_rows;  // per layer [n, head_dim]: the ring rows of the call's positions before it
  std::vector<std::optional<V41SourceMark>> sources;  // per layer; set for KV sources
  EngramHistory engram;
};

// Throws frank::Error for a call longer than the window: its own rows would overwrite each other in
// the rings, so no prefix of it could be restored.
V41CallCheckpoint take_v41_checkpoint(const V41Model& model, const V41Session& session, std::span<const int32_t> ids);

// Takes `session` — the one `before` was taken of, after the call of before.ids or after an earlier
// rewind of that call — back to where only the first `keep` tokens of the call were fed: equal, field
// by field, to a session that was fed only those, except the last-call records, which stay those of
// the whole call (so the same checkpoint can rewind it again, to fewer). Throws frank::Error,
// leaving the session untouched, when it is not such a continuation or keep is out of range.
void v41_rewind(const V41Model& model, const V41CallCheckpoint& before, V41Session& session, int64_t keep);

}  // namespace frank::engine
