#include "frank/engine/v41_rewind.h"

#include <fmt/format.h>

#include <algorithm>

namespace frank::engine {

void check_v41_rewindable(const model::V41Config& c, int64_t tokens) {
  if (tokens > c.sliding_window)
    throw Error(fmt::format("a verify call of {} tokens cannot be rewound: the window holds {}", tokens,
                            c.sliding_window));
}

EngramHistory v41_kept_engram(const model::V41Config& c, const model::EngramLayout& layout,
                              const EngramHistory& before, std::span<const int32_t> kept) {
  EngramHistory history = before;
  if (!c.engram.layer_ids.empty()) engram_advance(layout, kept, history);
  return history;
}

V41CallCheckpoint take_v41_checkpoint(const V41Model& model, const V41Session& session, std::span<const int32_t> ids) {
  const model::V41Config& c = model.config();
  const int64_t n = static_cast<int64_t>(ids.size()), window = c.sliding_window, hd = c.head_dim;
  check_v41_rewindable(c, n);
  V41CallCheckpoint checkpoint{session.position, {ids.begin(), ids.end()}, {}, {}, session.engram};
  for (const auto& ring : session.windows) {
    Tensor rows({n, hd});
    for (int64_t t = 0; t < n; ++t) std::copy_n(ring.begin() + ((session.position + t) % window) * hd, hd, rows.row(t));
    checkpoint.window_rows.push_back(std::move(rows));
  }
  for (const auto& source : session.sources)
    checkpoint.sources.push_back(source ? std::optional(V41SourceMark{source->pending_kv, source->pending_gate,
                                                                      source->pending, source->pending_position,
                                                                      source->n_entries})
                                        : std::nullopt);
  return checkpoint;
}

void v41_rewind(const V41Model& model, const V41CallCheckpoint& before, V41Session& session, int64_t keep) {
  const model::V41Config& c = model.config();
  if (session.windows.size() != before.window_rows.size())
    throw Error("V4.1 rewind: the checkpoint was taken of another model's session");
  check_v41_continuation(c, before, session, keep);
  const int64_t start = before.position, n = static_cast<int64_t>(before.ids.size());
  const int64_t window = c.sliding_window, hd = c.head_dim;

  // The rejected positions' ring rows go back to the earlier tokens' they overwrote.
  for (size_t l = 0; l < session.windows.size(); ++l)
    for (int64_t t = keep; t < n; ++t)
      std::copy_n(before.window_rows[l].row(t), hd, session.windows[l].begin() + ((start + t) % window) * hd);

  for (size_t l = 0; l < session.sources.size(); ++l) {
    if (!session.sources[l]) continue;
    V41SourceState& source = *session.sources[l];
    const V41SourceMark& mark = *before.sources[l];
    const int ratio = c.compress_ratio[l];
    const int64_t kept = v41_kept_entries(mark.n_entries, start, keep, ratio);
    const int64_t key_width = source.n_entries == 0 ? 0 : static_cast<int64_t>(source.index_keys.size()) / source.n_entries;
    source.entries.resize(static_cast<size_t>(kept * hd));
    source.index_keys.resize(static_cast<size_t>(kept * key_width));
    source.n_entries = kept;
    if (ratio == 1) continue;  // no open group
    // The open group as it was before the call, then the kept tokens' raw rows through the same
    // bookkeeping as pooling (the groups they close are already among the kept entries).
    source.pending_kv = mark.pending_kv;
    source.pending_gate = mark.pending_gate;
    source.pending = mark.pending;
    source.pending_position = mark.pending_position;
    const V41CallRecord& call = source.last_call;
    for (int64_t t = 0; t < keep; ++t)
      if (source.add_to_group(call.kv.data() + t * hd, call.gate.data() + t * hd, hd, start + t, ratio))
        source.close_group();
  }

  session.engram =
      v41_kept_engram(c, model.engram(), before.engram, std::span(before.ids).first(static_cast<size_t>(keep)));
  session.position = start + keep;
}

}  // namespace frank::engine
