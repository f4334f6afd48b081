#include "frank/engine/session_checkpoint.h"

#include "frank/core/error.h"

namespace frank::engine {
namespace {

CompressorCheckpoint snapshot(const CompressorState& s) {
  return {s.pending_kv, s.pending_gate, s.pending, s.overlap_kv, s.overlap_gate, s.has_overlap, s.n_entries};
}

CompressorState rebuild(const CompressorCheckpoint& c, const CompressorState& later) {
  if (later.n_entries < c.n_entries) throw Error("checkpoint restore: the later session has fewer entries");
  CompressorState s{c.pending_kv, c.pending_gate, c.pending, c.overlap_kv, c.overlap_gate, c.has_overlap, {}, 0};
  const size_t width = later.n_entries == 0 ? 0 : later.entries.size() / static_cast<size_t>(later.n_entries);
  s.entries.assign(later.entries.begin(), later.entries.begin() + static_cast<std::ptrdiff_t>(width * c.n_entries));
  s.n_entries = c.n_entries;
  return s;
}

}  // namespace

size_t SessionCheckpoint::bytes() const {
  size_t n = sizeof(*this);
  for (const auto& l : layers) n += l.window.size() * sizeof(float) + open_window_bytes(l.compressor) + open_window_bytes(l.indexer);
  return n;
}

SessionCheckpoint take_checkpoint(const Session& session) {
  SessionCheckpoint c{session.position, {}};
  for (const auto& l : session.layers) c.layers.push_back({l.window, snapshot(l.compressor), snapshot(l.indexer)});
  return c;
}

Session restore_checkpoint(const SessionCheckpoint& checkpoint, const Session& later) {
  if (later.position < checkpoint.position || later.layers.size() != checkpoint.layers.size())
    throw Error("checkpoint restore: the session does not continue the checkpoint");
  Session s;
  s.position = checkpoint.position;
  for (size_t i = 0; i < checkpoint.layers.size(); ++i) {
    const auto& c = checkpoint.layers[i];
    s.layers.push_back({c.window, rebuild(c.compressor, later.layers[i].compressor),
                        rebuild(c.indexer, later.layers[i].indexer), CallRecord{}});
  }
  return s;
}

}  // namespace frank::engine
