#include "frank/cuda/device_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>

#include "frank/core/error.h"

namespace frank::cuda {
namespace {

// The pieces of a compressor that a call of `tokens` tokens at `start` can overwrite (compress_chunk's
// carry step): the pending rows of its positions (row p % ratio), and the overlap half when a
// window closes. Nothing before the compressor's first call (its buffers do not exist yet, and
// nothing of them is read before they are written).
void add_compressor(SavedPieces& saved, DeviceCompressor& d, const engine::Compressor& c, int64_t start,
                    int64_t tokens) {
  if (d.pending_kv.empty()) return;
  const int64_t ratio = c.ratio(), row = int64_t{c.projection_width()} * sizeof(float);
  for (int64_t t = 0; t < std::min(tokens, ratio); ++t)
    for (DeviceArray<float>* a : {&d.pending_kv, &d.pending_gate})
      saved.add(reinterpret_cast<uint8_t*>(a->data()) + ((start + t) % ratio) * row, row, -1);
  if (!d.overlap_kv.empty() && (start + tokens) / ratio > start / ratio)
    for (DeviceArray<float>* a : {&d.overlap_kv, &d.overlap_gate})
      saved.add(a->data(), static_cast<int64_t>(a->bytes()), -1);
}

}  // namespace

DeviceCheckpoint take_checkpoint(CudaModel& model, DeviceSession& session, int64_t tokens) {
  const int64_t W = model.model().config().sliding_window, start = session.position;
  if (tokens < 0 || tokens > W)
    throw Error(fmt::format("CUDA checkpoint: a call of {} tokens (window {}) cannot be rolled back", tokens, W));
  cudaStream_t stream = model.stream();
  DeviceCheckpoint cp;
  cp.position = start;
  cp.tokens = tokens;
  cp.recorded_from = session.recorded_from;
  cp.records = session.records;
  cp.position_at = DeviceArray<int64_t>({1}, stream);
  cp.position_at.copy_from_host(&cp.position);
  for (size_t l = 0; l < session.layers.size(); ++l) {
    DeviceLayerState& s = session.layers[l];
    const engine::Attention& a = model.model().attention()[l];
    for (int64_t t = 0; t < tokens; ++t)
      cp.saved.add(s.window.data() + ((start + t) % W) * s.kv.row_bytes, s.kv.row_bytes, t);
    if (a.compressor()) add_compressor(cp.saved, s.compressor, *a.compressor(), start, tokens);
    if (a.index_compressor()) add_compressor(cp.saved, s.indexer, *a.index_compressor(), start, tokens);
  }
  cp.saved.save(stream);
  return cp;
}

void rewind(CudaModel& model, DeviceSession& session, const DeviceCheckpoint& checkpoint, int64_t keep) {
  const int64_t start = checkpoint.position, fed = session.position - start;
  if (fed < 0 || fed > checkpoint.tokens || keep < 0 || keep > fed)
    throw Error(fmt::format("CUDA rewind: keeping {} of {} tokens fed since a checkpoint for {} is not possible",
                            keep, fed, checkpoint.tokens));
  if (keep > 0 && session.recorded_from != start)
    throw Error("CUDA rewind: the session's last call is not the verify call after the checkpoint");
  cudaStream_t stream = model.stream();
  std::vector<ByteCopy> copies;
  checkpoint.saved.restore_copies(keep, copies);
  run_copies(copies, stream);
  // The kept tokens through the compressors again, from the state before the call.
  CudaOps ops(model.device_weights(), stream,
              {checkpoint.position_at.data(), start + keep}, nullptr, /*keep_routing=*/false);
  for (size_t l = 0; l < session.layers.size(); ++l)
    ops.replay_call(session.layers[l], model.model().attention()[l], keep);
  session.position = start + keep;
  if (keep == 0 && session.records == checkpoint.records) session.recorded_from = checkpoint.recorded_from;
}

}  // namespace frank::cuda
