#pragma once
// The cheap exact rollback of a verify step on the GPU (engine::Model::rewind's device twin).
// Before a call of up to `tokens` tokens, take_checkpoint saves on the device only what that call
// can overwrite: the window-ring rows of its positions, the compressors' pending rows it reuses
// and their overlap halves when it can close a window. Entries and index keys are append-only and
// counted from the position, so nothing of them is saved. rewind() then puts those bytes back and
// pushes the kept tokens' recorded projections (CudaModel::verify keeps them) through the
// compressors again; the kept tokens' window rows are the call's own. Nothing of the model runs
// again, and nothing moves to the host but the copy tables.
#include <cstdint>

#include "frank/cuda/cuda_model.h"
#include "frank/cuda/saved_pieces.h"

namespace frank::cuda {

struct DeviceCheckpoint {
  int64_t position = 0, tokens = 0;
  int64_t recorded_from = -1, records = 0;  // the session's, when the checkpoint was taken
  DeviceArray<int64_t> position_at;  // [1]: `position`, where the replayed compressors read it
  // The window rows (each naming the call's token that writes it) and compressor rows (always
  // restored) the call can overwrite.
  SavedPieces saved;
};

// Saves what a call of up to `tokens` tokens at session.position can overwrite (issued on the
// model's stream; nothing waits). Throws frank::Error when `tokens` exceeds the sliding window.
DeviceCheckpoint take_checkpoint(CudaModel& model, DeviceSession& session, int64_t tokens);

// The session as if only the first `keep` tokens fed since `checkpoint` had been consumed: equal
// to a session that was fed exactly those. keep > 0 needs the session's last call to be the
// verify call (CudaModel::verify) right after the checkpoint, or a rewind of it (so a step can be
// rewound again, to fewer); keep == 0 undoes any calls since the checkpoint that it covers, and
// when none of them recorded, the session's record is again the one it had at the checkpoint (so a
// call probed and undone in between does not stop a rewind of the verify call before it).
// Throws frank::Error otherwise.
void rewind(CudaModel& model, DeviceSession& session, const DeviceCheckpoint& checkpoint, int64_t keep);

}  // namespace frank::cuda
