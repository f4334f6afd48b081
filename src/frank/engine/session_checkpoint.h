#pragma once
// A compact snapshot of a Session at one position: everything that cannot be recovered from a
// later state of the same token stream. Compressed entries and index keys only grow, so the
// snapshot keeps just their counts; the window rows and the compressors' open windows and
// overlap halves are copied, because later tokens overwrite them.
#include <cstdint>
#include <vector>

#include "frank/engine/session.h"

namespace frank::engine {

struct CompressorCheckpoint {
  std::vector<float> pending_kv, pending_gate;
  int pending = 0;
  std::vector<float> overlap_kv, overlap_gate;
  bool has_overlap = false;
  int64_t n_entries = 0;
};

struct LayerCheckpoint {
  std::vector<float> window;
  CompressorCheckpoint compressor, indexer;
};

struct SessionCheckpoint {
  int64_t position = 0;
  std::vector<LayerCheckpoint> layers;

  size_t bytes() const;
};

// Bytes of a compressor's open window and overlap half (a CompressorState or its checkpoint).
template <typename Compressor>
size_t open_window_bytes(const Compressor& c) {
  return (c.pending_kv.size() + c.pending_gate.size() + c.overlap_kv.size() + c.overlap_gate.size()) * sizeof(float);
}

SessionCheckpoint take_checkpoint(const Session& session);

// The session as it was at `checkpoint`, rebuilt from `later`: a session that consumed the same
// tokens past the checkpoint (its entries extend the checkpoint's). Throws frank::Error when
// `later` cannot be the continuation (it is behind the checkpoint or has fewer entries).
Session restore_checkpoint(const SessionCheckpoint& checkpoint, const Session& later);

}  // namespace frank::engine
