#include "frank/cuda/session_transfer.h"

#include <fmt/format.h>

#include <span>
#include <vector>

#include "frank/core/error.h"
#include "frank/engine/kv_record.h"

namespace frank::cuda {
namespace {

// What a compressor's state holds after `position` tokens (engine::Compressor::push).
struct CompressorShape {
  int64_t pending, entries;
  bool has_overlap;
  int64_t width, dim;
};
CompressorShape shape_at(const engine::Compressor& c, int64_t position) {
  const bool overlapping = c.projection_width() == 2 * c.dim();
  return {position % c.ratio(), position / c.ratio(), overlapping && position >= c.ratio(), c.projection_width(),
          c.dim()};
}

void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes > 0) check(cudaMemcpyAsync(dst, src, bytes, kind, stream), "session transfer");
}

// The first rows.size() / layout.dim records at `records` as fp32 rows (decoded: exact). Waits.
void download_rows(const uint8_t* records, const KvRowLayout& layout, std::span<float> rows, cudaStream_t stream) {
  const size_t n = rows.size() / static_cast<size_t>(layout.dim), bytes = static_cast<size_t>(layout.row_bytes);
  std::vector<uint8_t> host(n * bytes);
  copy(host.data(), records, host.size(), cudaMemcpyDeviceToHost, stream);
  check(cudaStreamSynchronize(stream), "session download");
  for (size_t r = 0; r < n; ++r)
    engine::decode_kv_row(layout, std::span<const uint8_t>(host).subspan(r * bytes, bytes),
                          rows.subspan(r * layout.dim, static_cast<size_t>(layout.dim)));
}

// fp32 rows stored as records at `records` (encoded as the kernels encode). Waits.
void upload_rows(std::span<const float> rows, const KvRowLayout& layout, uint8_t* records, cudaStream_t stream) {
  const size_t n = rows.size() / static_cast<size_t>(layout.dim), bytes = static_cast<size_t>(layout.row_bytes);
  std::vector<uint8_t> host(n * bytes);
  for (size_t r = 0; r < n; ++r)
    engine::encode_kv_row(layout, rows.subspan(r * layout.dim, static_cast<size_t>(layout.dim)),
                          std::span<uint8_t>(host).subspan(r * bytes, bytes));
  copy(records, host.data(), host.size(), cudaMemcpyHostToDevice, stream);
  check(cudaStreamSynchronize(stream), "session upload");
}

// The compressor's open window and overlap half (a CompressorState or its checkpoint). Waits for
// nothing: the caller synchronises before reading.
template <typename State>
void download_open_window(const DeviceCompressor& d, const engine::Compressor& c, int64_t position, State& h,
                          cudaStream_t stream) {
  const CompressorShape s = shape_at(c, position);
  h.pending = static_cast<int>(s.pending);
  h.pending_kv.resize(static_cast<size_t>(s.pending * s.width));
  h.pending_gate.resize(h.pending_kv.size());
  copy(h.pending_kv.data(), d.pending_kv.data(), h.pending_kv.size() * sizeof(float), cudaMemcpyDeviceToHost, stream);
  copy(h.pending_gate.data(), d.pending_gate.data(), h.pending_gate.size() * sizeof(float), cudaMemcpyDeviceToHost,
       stream);
  h.has_overlap = s.has_overlap;
  if (s.has_overlap) {
    h.overlap_kv.resize(static_cast<size_t>(c.ratio() * s.dim));
    h.overlap_gate.resize(h.overlap_kv.size());
    copy(h.overlap_kv.data(), d.overlap_kv.data(), h.overlap_kv.size() * sizeof(float), cudaMemcpyDeviceToHost, stream);
    copy(h.overlap_gate.data(), d.overlap_gate.data(), h.overlap_gate.size() * sizeof(float), cudaMemcpyDeviceToHost,
         stream);
  }
  h.n_entries = s.entries;
}

void download(const DeviceCompressor& d, const engine::Compressor& c, int64_t position, engine::CompressorState& h,
              cudaStream_t stream) {
  download_open_window(d, c, position, h, stream);
  h.entries.resize(static_cast<size_t>(h.n_entries * c.dim()));
  download_rows(d.entries.data(), entry_layout(d, c), h.entries, stream);
}

void check_fits(const engine::CompressorState& h, const engine::Compressor& c, int64_t position, const char* which,
                size_t layer) {
  const CompressorShape s = shape_at(c, position);
  const bool fits = h.pending == s.pending && std::ssize(h.pending_kv) == s.pending * s.width &&
                    h.pending_gate.size() == h.pending_kv.size() && h.has_overlap == s.has_overlap &&
                    (!s.has_overlap || (std::ssize(h.overlap_kv) == c.ratio() * s.dim &&
                                        h.overlap_gate.size() == h.overlap_kv.size())) &&
                    h.n_entries == s.entries && std::ssize(h.entries) == s.entries * s.dim;
  if (!fits)
    throw Error(fmt::format("session upload: layer {}'s {} state does not match position {} of this model", layer,
                            which, position));
}

void upload(const engine::CompressorState& h, const engine::Compressor& c, DeviceCompressor& d, cudaStream_t stream) {
  copy(d.pending_kv.data(), h.pending_kv.data(), h.pending_kv.size() * sizeof(float), cudaMemcpyHostToDevice, stream);
  copy(d.pending_gate.data(), h.pending_gate.data(), h.pending_gate.size() * sizeof(float), cudaMemcpyHostToDevice,
       stream);
  if (h.has_overlap) {
    copy(d.overlap_kv.data(), h.overlap_kv.data(), h.overlap_kv.size() * sizeof(float), cudaMemcpyHostToDevice, stream);
    copy(d.overlap_gate.data(), h.overlap_gate.data(), h.overlap_gate.size() * sizeof(float), cudaMemcpyHostToDevice,
         stream);
  }
  upload_rows(h.entries, entry_layout(d, c), d.entries.data(), stream);
}

}  // namespace

engine::Session download_session(CudaModel& model, const DeviceSession& session) {
  check(cudaStreamSynchronize(model.stream()), "session download");  // the state is final
  const engine::Model& m = model.model();
  engine::Session host(m.config());
  host.position = session.position;
  for (size_t l = 0; l < session.layers.size(); ++l) {
    const DeviceLayerState& d = session.layers[l];
    engine::LayerState& h = host.layers[l];
    const engine::Attention& a = m.attention()[l];
    download_rows(d.window.data(), d.kv, h.window, model.stream());
    // A compressor that has seen no token yet may have no buffers on the device: nothing to copy.
    if (a.compressor() && !d.compressor.pending_kv.empty())
      download(d.compressor, *a.compressor(), session.position, h.compressor, model.stream());
    if (a.index_compressor() && !d.indexer.pending_kv.empty())
      download(d.indexer, *a.index_compressor(), session.position, h.indexer, model.stream());
  }
  check(cudaStreamSynchronize(model.stream()), "session download");
  return host;
}

engine::SessionCheckpoint download_checkpoint(CudaModel& model, const DeviceSession& session) {
  check(cudaStreamSynchronize(model.stream()), "checkpoint download");  // the state is final
  const engine::Model& m = model.model();
  const int64_t window = m.config().sliding_window, head_dim = m.config().head_dim;
  engine::SessionCheckpoint checkpoint{session.position, {}};
  checkpoint.layers.resize(session.layers.size());
  for (size_t l = 0; l < session.layers.size(); ++l) {
    const DeviceLayerState& d = session.layers[l];
    engine::LayerCheckpoint& h = checkpoint.layers[l];
    const engine::Attention& a = m.attention()[l];
    h.window.resize(static_cast<size_t>(window * head_dim));
    download_rows(d.window.data(), d.kv, h.window, model.stream());
    // As download_session: a compressor that has seen no token may have no buffers yet.
    if (a.compressor() && !d.compressor.pending_kv.empty())
      download_open_window(d.compressor, *a.compressor(), session.position, h.compressor, model.stream());
    if (a.index_compressor() && !d.indexer.pending_kv.empty())
      download_open_window(d.indexer, *a.index_compressor(), session.position, h.indexer, model.stream());
  }
  check(cudaStreamSynchronize(model.stream()), "checkpoint download");
  return checkpoint;
}

DeviceSession upload_session(CudaModel& model, const engine::Session& session, KvFormat kv) {
  const engine::Model& m = model.model();
  const model::ModelConfig& c = m.config();
  if (std::ssize(session.layers) != c.num_layers)
    throw Error(fmt::format("session upload: {} layers for a model of {}", session.layers.size(), c.num_layers));
  for (size_t l = 0; l < session.layers.size(); ++l) {
    const engine::LayerState& h = session.layers[l];
    const engine::Attention& a = m.attention()[l];
    if (std::ssize(h.window) != int64_t{c.sliding_window} * c.head_dim)
      throw Error(fmt::format("session upload: layer {}'s window does not fit this model", l));
    if (a.compressor()) check_fits(h.compressor, *a.compressor(), session.position, "compressor", l);
    if (a.index_compressor()) check_fits(h.indexer, *a.index_compressor(), session.position, "indexer", l);
  }

  DeviceSession d = model.new_session(kv);
  d.position = session.position;
  // Buffers and entries of the right sizes, as the next call would make them.
  const CudaOps ops(model.device_weights(), model.stream(), {d.position_at.data(), session.position});
  for (size_t l = 0; l < session.layers.size(); ++l) {
    const engine::LayerState& h = session.layers[l];
    DeviceLayerState& dl = d.layers[l];
    ops.prepare(dl, m.attention()[l]);
    const engine::Attention& a = m.attention()[l];
    upload_rows(h.window, dl.kv, dl.window.data(), model.stream());
    if (a.compressor()) upload(h.compressor, *a.compressor(), dl.compressor, model.stream());
    if (a.index_compressor()) upload(h.indexer, *a.index_compressor(), dl.indexer, model.stream());
  }
  check(cudaStreamSynchronize(model.stream()), "session upload");  // the host vectors may go away
  return d;
}

}  // namespace frank::cuda
