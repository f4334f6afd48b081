#include "frank/cuda/device_v41_checkpoint.h"

#include <algorithm>

#include "frank/core/error.h"
#include "frank/engine/v41_rewind.h"

namespace frank::cuda {
namespace {

const uint8_t* row_of(const DeviceArray<float>& a, int64_t row, int64_t width) {
  return reinterpret_cast<const uint8_t*>(a.data() + row * width);
}
uint8_t* row_of(DeviceArray<float>& a, int64_t row, int64_t width) {
  return reinterpret_cast<uint8_t*>(a.data() + row * width);
}

}  // namespace

DeviceV41Checkpoint take_v41_checkpoint(const CudaV41Model& model, DeviceV41Session& session,
                                        std::span<const int32_t> ids) {
  const model::V41Config& c = model.model().config();
  const int64_t n = static_cast<int64_t>(ids.size()), start = session.position, window = c.sliding_window;
  const int64_t hd = c.head_dim, row = hd * static_cast<int64_t>(sizeof(float));
  engine::check_v41_rewindable(c, n);
  DeviceV41Checkpoint cp{session.windows.front().data(), start, {ids.begin(), ids.end()}, {}, session.engram, {}};
  for (auto& ring : session.windows)
    for (int64_t t = 0; t < n; ++t) cp.saved.add(row_of(ring, (start + t) % window, hd), row, t);
  for (auto& source : session.sources) {
    cp.sources.push_back(source ? std::optional(DeviceV41SourceMark{source->n_entries}) : std::nullopt);
    if (!source || source->ratio == 1 || source->pending_kv.empty()) continue;
    // The open group's rows (positions group .. start-1, row p % ratio): the call's tokens write
    // that group's other rows, and once the token at group + ratio - 1 closes it, later groups'
    // rows over these.
    const int64_t group = start / source->ratio * source->ratio, closing = group + source->ratio - 1 - start;
    for (int64_t p = group; p < start; ++p)
      for (DeviceArray<float>* a : {&source->pending_kv, &source->pending_gate})
        cp.saved.add(row_of(*a, p % source->ratio, hd), row, closing);
  }
  cp.saved.save(model.stream());
  return cp;
}

void v41_rewind(const CudaV41Model& model, const DeviceV41Checkpoint& before, DeviceV41Session& session,
                int64_t keep) {
  const model::V41Config& c = model.model().config();
  if (session.windows.empty() || session.windows.front().data() != before.memory)
    throw Error("V4.1 rewind: the checkpoint was taken of another session");
  engine::check_v41_continuation(c, before, session, keep);
  const int64_t start = before.position, end = start + keep, hd = c.head_dim;
  const int64_t row = hd * static_cast<int64_t>(sizeof(float));
  std::vector<ByteCopy> copies;
  before.saved.restore_copies(keep, copies);
  for (size_t l = 0; l < session.sources.size(); ++l) {
    if (!session.sources[l]) continue;
    DeviceV41Source& source = *session.sources[l];
    const int ratio = c.compress_ratio[l];
    source.n_entries = engine::v41_kept_entries(before.sources[l]->n_entries, start, keep, ratio);
    if (ratio == 1) continue;  // no open group
    // The kept tokens' rows of the group they leave open; its rows from before the call, if it
    // began before it, are among the restored pieces.
    const DeviceV41CallRecord& call = source.last_call;
    for (int64_t p = std::max(end / ratio * ratio, start); p < end; ++p) {
      copies.push_back({row_of(call.kv, p - start, hd), row_of(source.pending_kv, p % ratio, hd), row});
      copies.push_back({row_of(call.gate, p - start, hd), row_of(source.pending_gate, p % ratio, hd), row});
    }
  }
  run_copies(copies, model.stream());
  session.engram = engine::v41_kept_engram(c, model.model().engram(), before.engram,
                                           std::span(before.ids).first(static_cast<size_t>(keep)));
  session.position = end;
}

}  // namespace frank::cuda
