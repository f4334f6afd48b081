#pragma once
// The exact rollback of a DeepSeek-V4.1 verify call on the GPU: engine::take_v41_checkpoint and
// engine::v41_rewind (v41_rewind.h, dsv41-model.md §8 "Verify") on a DeviceV41Session, with the same
// contract. Before the call, the window-ring rows of its positions (n per layer) and each ratio-2
// source's rows of its open group are saved on the device (one copy kernel), with the sources'
// entry counts and the Engram look-back (host). A rewind to `keep` tokens puts back the rows of the
// rejected positions, cuts entries and index keys by the count, gives each ratio-2 source the open
// group of the kept prefix (its rows from before the call, then the kept tokens' raw rows from the
// call's record, DeviceV41Source::last_call), all in one copy kernel, and moves the look-back on by
// the kept ids. Nothing of the model runs again.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "frank/cuda/cuda_v41_model.h"
#include "frank/cuda/saved_pieces.h"
#include "frank/engine/engram.h"

namespace frank::cuda {

// A KV source just before the call: its entry count (entries only grow; its open-group rows are
// among the saved pieces).
struct DeviceV41SourceMark {
  int64_t n_entries = 0;
};

struct DeviceV41Checkpoint {
  // The session's first window ring (rings are never reallocated): the pieces are addresses in
  // that session's memory, so only it can be rewound with this checkpoint.
  const float* memory = nullptr;
  int64_t position = 0;
  std::vector<int32_t> ids;  // the call's tokens: the Engram look-back of a kept prefix
  std::vector<std::optional<DeviceV41SourceMark>> sources;  // per layer; set for KV sources
  engine::EngramHistory engram;
  // Ring rows, each naming the call's token that writes it; a ratio-2 source's open-group rows,
  // naming the token that closes the group.
  SavedPieces saved;
};

// What the call of `ids` at session.position will overwrite (issued on the model's stream; nothing
// waits). Throws frank::Error for a call longer than the window (engine::check_v41_rewindable).
DeviceV41Checkpoint take_v41_checkpoint(const CudaV41Model& model, DeviceV41Session& session,
                                        std::span<const int32_t> ids);

// engine::v41_rewind on the device: `session`, after the call of before.ids or a rewind of it, as if
// only the first `keep` of them had been fed (the last-call records stay the whole call's, so it can
// be rewound again, to fewer). Throws frank::Error, leaving the session untouched, when it is not
// such a continuation (engine::check_v41_continuation), keep is out of range, or it is another
// session (a copy included) than the one the checkpoint was taken of.
void v41_rewind(const CudaV41Model& model, const DeviceV41Checkpoint& before, DeviceV41Session& session,
                int64_t keep);

}  // namespace frank::cuda
