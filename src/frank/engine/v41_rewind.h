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

#include <fmt/format.h>

#include "frank/core/error.h"
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

// Groups closed by the tokens before `position`: group g holds positions g*ratio .. (g+1)*ratio-1
// (pool_groups), so the tokens start .. start+keep-1 close v41_closed_groups(start+keep) -
// v41_closed_groups(start) of them.
inline int64_t v41_closed_groups(int64_t position, int ratio) { return position / ratio; }

// The entry count of a KV source that held `before` entries at `start`, once the first `keep`
// tokens of a call from there are kept.
inline int64_t v41_kept_entries(int64_t before, int64_t start, int64_t keep, int ratio) {
  return before + v41_closed_groups(start + keep, ratio) - v41_closed_groups(start, ratio);
}

// Throws frank::Error unless `session` can be taken back to `keep` tokens of the call `before` was
// taken for: keep within the call, the session after it or after a rewind of it to no fewer, and
// every source's entries and last-call record (ratio 2) those of that call. Shared by the CPU
// rewind and the device one (cuda/device_v41_checkpoint.h): a Checkpoint has position, ids and
// per layer sources (optional, with n_entries); a Session has position and per layer sources
// (optional, with n_entries and last_call.start / .tokens).
template <class Checkpoint, class Session>
void check_v41_continuation(const model::V41Config& c, const Checkpoint& before, const Session& session,
                            int64_t keep) {
  const int64_t start = before.position, n = static_cast<int64_t>(before.ids.size());
  if (keep < 0 || keep > n || session.position < start + keep || session.position > start + n)
    throw Error(fmt::format("V4.1 rewind: cannot keep {} tokens of the {}-token call at {} from position {}", keep, n,
                            start, session.position));
  if (session.sources.size() != before.sources.size())
    throw Error("V4.1 rewind: the checkpoint was taken of another model's session");
  for (size_t l = 0; l < session.sources.size(); ++l) {
    const auto& source = session.sources[l];
    if (!source) continue;
    const int ratio = c.compress_ratio[l];
    const int64_t kept = v41_kept_entries(before.sources[l]->n_entries, start, keep, ratio);
    const bool record_fits = ratio == 1 || (source->last_call.start == start && source->last_call.tokens == n);
    if (source->n_entries < kept || !record_fits)
      throw Error("V4.1 rewind: the session's last forward call is not the one after the checkpoint");
  }
}

// Throws frank::Error for a call of more tokens than the window (its own rows would overwrite each
// other in the rings, so no prefix of it could be restored); shared with the device checkpoint.
void check_v41_rewindable(const model::V41Config& c, int64_t tokens);

// The Engram look-back once the `kept` ids of a call have been fed after `before` (unchanged
// without Engram layers).
EngramHistory v41_kept_engram(const model::V41Config& c, const model::EngramLayout& layout,
                              const EngramHistory& before, std::span<const int32_t> kept);

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
