#pragma once
// A session's state moved between the GPU and the host: a DeviceSession's window rings,
// compressor buffers and compressed entries as an engine::Session — the CPU reference's layout,
// which session checkpoints and the prefix cache store — and back. The copies are exact, so a
// session taken to the host and back continues bit for bit as if it had never left the GPU, and a
// session the CPU reference computed continues on the GPU within the backend's tolerance. K=V rows
// kept as bf16 or fp8 records are decoded on the way down (exactly) and encoded on the way up.
//
// The GPU keeps no record of its last call (CallRecord): a session from the device has none, so
// it cannot be rewound by engine::Model::rewind; one uploaded leaves its record behind.
#include "frank/cuda/cuda_model.h"
#include "frank/engine/session.h"
#include "frank/engine/session_checkpoint.h"

namespace frank::cuda {

// Waits for the model's stream.
engine::Session download_session(CudaModel& model, const DeviceSession& session);

// A checkpoint of the session at its position (engine::take_checkpoint of the downloaded session,
// without downloading the compressed entries and index keys, which only grow: restore_checkpoint
// takes them from a later download of the same token stream). Waits for the model's stream.
engine::SessionCheckpoint download_checkpoint(CudaModel& model, const DeviceSession& session);

// Throws frank::Error, leaving nothing behind, when `session` does not fit the model (layer count,
// window, compressor state sizes that disagree with its position). The device session keeps its
// K=V rows as `kv` records (a session downloaded from one in the same format uploads exactly).
DeviceSession upload_session(CudaModel& model, const engine::Session& session, KvFormat kv = KvFormat::F32);

}  // namespace frank::cuda
