#include "frank/cuda/cuda_ops_v41.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "frank/core/error.h"
#include "frank/cuda/v41_ops.cuh"

namespace frank::cuda {
namespace {

// Appends `rows` [k, cols] to `to` after its first `used` rows (reserve_rows: growing by doubling).
void append_rows(DeviceArray<float>& to, int64_t used, const DeviceArray<float>& rows, cudaStream_t stream) {
  if (rows.empty()) return;
  reserve_rows(to, used + rows.rows(), rows.cols(), stream);
  check(cudaMemcpyAsync(to.data() + used * rows.cols(), rows.data(), rows.bytes(), cudaMemcpyDeviceToDevice, stream),
        "publish");
}

}  // namespace

CudaOps::Mix CudaV41Ops::hc_map(const model::HyperConnectionWeights& hc, const Array& streams,
                                const model::CommonConfig& c) const {
  const ScopedOp timed(profile_, "hc_map", stream_);
  const int N = c.hc_mult;
  // Allocated on the main stream, before the side stream is ordered after it.
  Mix mix({streams.rows(), 2 * N + N * N}, stream_);
  count(static_cast<double>(hc.fn.numel()) * 4, 0);
  const float *fn = w_.tensor(hc.fn), *base = w_.tensor(hc.base), *scale = w_.tensor(hc.scale);
  cudaStream_t on = stream_;
  if (side_ != nullptr) {
    wait_for_mix();  // one hc_map in flight at a time (its kernel's arrival counters are shared)
    side_->fork(stream_);
    on = side_->stream();
  }
  check(cuda::hc_map(streams.data(), static_cast<int>(streams.rows()), N, c.hidden_size, fn, base, scale,
                     c.hc_sinkhorn_iters, c.hc_eps, c.rms_norm_eps, mix.data(), on),
        "hc_map");
  if (side_ != nullptr) {
    side_->finish();
    pending_mix_ = mix.data();
  }
  return mix;
}

void CudaV41Ops::wait_for_mix(const float* mix) const {
  if (pending_mix_ == nullptr || (mix != nullptr && mix != pending_mix_)) return;
  side_->wait(stream_);
  pending_mix_ = nullptr;
}

void CudaV41Ops::hc_post(const Mix& mix, const Array& sublayer, Array& streams, const model::CommonConfig& c) const {
  wait_for_mix(mix.data());
  CudaOps::hc_post(mix, sublayer, streams, c);
}

CudaOps::Array CudaV41Ops::hc_collapse(const Array& streams, const Mix* mix, const Tensor& norm, int64_t first,
                                       const model::CommonConfig& c) const {
  const ScopedOp timed(profile_, "hc_collapse", stream_);
  if (mix != nullptr) wait_for_mix(mix->data());  // the previous site's: already waited for in its hc_post
  Array out({streams.rows() - first, c.hidden_size}, stream_);
  check(cuda::hc_collapse(streams.data(), static_cast<int>(streams.rows()), c.hc_mult, c.hidden_size,
                          mix != nullptr ? mix->data() : nullptr, static_cast<int>(first), w_.tensor(norm),
                          c.rms_norm_eps, out.data(), stream_),
        "hc_collapse");
  return out;
}

void CudaV41Ops::fake_quant(Array& x, int width, engine::FakeQuant grid, int block) const {
  const ScopedOp timed(profile_, "fake_quant", stream_);
  if (x.empty()) return;
  check(cuda::fake_quant(x.data(), x.numel(), width, grid, block, stream_), "fake_quant");
}

CudaOps::Array CudaV41Ops::moe_v41(const model::V41Config& c, const model::MoeWeights& w, const Array& x,
                                   const Ids& ids) const {
  // The kernels apply the routing weight to the activation before `down`, as V4.1 does.
  return moe_forward(c, w, /*hash_layer=*/false, x, ids, c.gate_temp, nullptr);
}

CudaV41Ops::EngramRows CudaV41Ops::engram_rows(const model::EngramLayout& layout, const Ids& ids,
                                               engine::EngramHistory& history) const {
  EngramRows rows;
  rows.host = engine::engram_hash_ids(layout, ids.host, history);
  // [n, layers, columns] -> [layers][n, columns]
  const int64_t n = std::ssize(ids.host), layers = std::ssize(layout.modulus), columns = layout.columns;
  std::vector<int64_t> by_layer(rows.host.size());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t l = 0; l < layers; ++l)
      std::copy_n(rows.host.begin() + (t * layers + l) * columns, columns, by_layer.begin() + (l * n + t) * columns);
  rows.device = DeviceArray<int64_t>({std::ssize(by_layer)}, stream_);
  rows.device.copy_from_host(by_layer.data());  // from pageable memory: staged before it returns
  return rows;
}

void CudaV41Ops::engram_add(Array& streams, const model::V41EngramWeights& w, const EngramRows& rows,
                            const model::EngramLayout& layout, int slot, const model::CommonConfig& c) const {
  const ScopedOp timed(profile_, "engram_add", stream_);
  const int64_t n = streams.rows(), columns = layout.columns, layers = std::ssize(layout.modulus);
  const int64_t table_rows = w.table.rows();
  const int head_dim = static_cast<int>(w.table.cols());
  for (int64_t t = 0; t < n; ++t)  // engine::engram_gather's check, before anything is written
    for (int64_t j = 0; j < columns; ++j) {
      const int64_t id = rows.host[(t * layers + slot) * columns + j];
      if (id < 0 || id >= table_rows)
        throw Error(fmt::format("Engram row {} outside the table of {} rows", id, table_rows));
    }
  Array gathered({n, columns * head_dim}, stream_);
  check(cuda::engram_gather(w_.tensor(w.table), table_rows, head_dim, rows.device.data() + slot * n * columns,
                            n * columns, gathered.data(), stream_),
        "engram_add (gather)");
  const Array kv = linear(gathered, w.wkv);
  check(cuda::engram_mix(streams.data(), static_cast<int>(n), c.hc_mult, c.hidden_size, kv.data(),
                         w_.tensor(w.q_weight), w_.tensor(w.k_weight), c.rms_norm_eps, stream_),
        "engram_add (mix)");
}

CudaOps::Array CudaV41Ops::pool_groups(V41Source& s, const Array& kv, const Array* gate, int ratio,
                                       int64_t start) const {
  const ScopedOp timed(profile_, "pool_groups", stream_);
  if (gate == nullptr) return kv;  // ratio 1: every row is a group
  const int64_t dim = kv.cols(), groups = (start + kv.rows()) / ratio - start / ratio;
  if (s.pending_kv.empty()) {
    s.pending_kv = Array({ratio, dim}, stream_);
    s.pending_gate = Array({ratio, dim}, stream_);
  }
  record_call(s.last_call, kv, *gate, start);
  Array latents({groups, dim}, stream_);
  if (kv.empty()) return latents;
  check(cuda::pool_groups(s.pending_kv.data(), s.pending_gate.data(), kv.data(), gate->data(),
                          static_cast<int>(kv.rows()), position_.device, ratio, static_cast<int>(dim), latents.data(),
                          static_cast<int>(groups), stream_),
        "pool_groups");
  return latents;
}

void CudaV41Ops::record_call(DeviceV41CallRecord& record, const Array& kv, const Array& gate, int64_t start) const {
  record.start = start;
  record.tokens = kv.rows() <= record_limit_ ? kv.rows() : 0;
  if (record.tokens == 0) return;
  for (auto [to, from] : {std::pair{&record.kv, &kv}, std::pair{&record.gate, &gate}}) {
    reserve_rows(*to, from->rows(), from->cols(), stream_);
    check(cudaMemcpyAsync(to->data(), from->data(), from->bytes(), cudaMemcpyDeviceToDevice, stream_), "record_call");
  }
}

void CudaV41Ops::publish(V41Source& s, const Array& entries, const Array* index_keys) const {
  if (index_keys != nullptr) append_rows(s.index_keys, s.n_entries, *index_keys, stream_);
  append_rows(s.entries, s.n_entries, entries, stream_);
  s.n_entries += entries.rows();
}

CudaOps::Array CudaV41Ops::index_scores(const Array& q, const Array& w, const V41Source& keys) const {
  const ScopedOp timed(profile_, "index_scores", stream_);
  const int64_t n = q.rows(), heads = w.cols();
  Array scores({n, keys.n_entries}, stream_);
  if (scores.empty()) return scores;
  count(0, static_cast<double>(keys.index_keys.cols() * keys.n_entries) * 4);
  check(indexer_scores(q.data(), w.data(), static_cast<int>(n), static_cast<int>(heads),
                       static_cast<int>(q.cols() / heads), keys.index_keys.data(), position_.device, /*ratio=*/0,
                       static_cast<int>(keys.n_entries), scores.data(), stream_),
        "index_scores");
  return scores;
}

CudaV41Ops::Candidates CudaV41Ops::candidate_blocks(const Array& scores, int64_t, int ratio, int topk_blocks,
                                                    int block_size) const {
  const ScopedOp timed(profile_, "candidate_blocks", stream_);
  Candidates c{DeviceArray<int32_t>({scores.rows(), topk_blocks}, stream_), block_size,
               static_cast<int>(scores.cols())};
  check(cuda::candidate_blocks(scores.data(), static_cast<int>(scores.rows()), c.block_cols, position_.device, ratio,
                               topk_blocks, block_size, c.blocks.data(), stream_),
        "candidate_blocks");
  return c;
}

CudaOps::Selection CudaV41Ops::select_entries(const Array& scores, int64_t, int ratio, const Candidates* within,
                                              int topk) const {
  const ScopedOp timed(profile_, "select_entries", stream_);
  const int n = static_cast<int>(scores.rows()), cols = static_cast<int>(scores.cols());
  Selection selected({n, topk}, stream_);
  if (within == nullptr) {
    check(cuda::select_entries(scores.data(), n, cols, position_.device, ratio, nullptr, topk, selected.data(), stream_),
          "select_entries");
  } else if (fused_candidates_) {
    check(select_entries_in_blocks(scores.data(), n, cols, position_.device, ratio, within->blocks.data(),
                                   static_cast<int>(within->blocks.cols()), within->block_size, within->block_cols,
                                   topk, selected.data(), stream_),
          "select_entries (in blocks)");
  } else {
    DeviceArray<uint8_t> mask({n, cols}, stream_);
    check(candidate_mask(within->blocks.data(), n, static_cast<int>(within->blocks.cols()), within->block_size,
                         within->block_cols, cols, mask.data(), stream_),
          "select_entries (mask)");
    check(cuda::select_entries(scores.data(), n, cols, position_.device, ratio, mask.data(), topk, selected.data(),
                               stream_),
          "select_entries (masked)");
  }
  return selected;
}

CudaOps::Array CudaV41Ops::attend_v41(const Array& q, const Array& kv, const Array& ring, int64_t start, int window,
                                      const Tensor& sinks, const engine::RopeTable& rope, const V41Source* entries,
                                      const Selection* selected) const {
  const ScopedOp timed(profile_, "attend", stream_);
  const int hd = static_cast<int>(kv.cols()), H = static_cast<int>(q.cols() / hd), n = static_cast<int>(q.rows());
  const int pairs = static_cast<int>(rope.inv_freq().size());
  // The rows are fp32 records: the K=V rows themselves (already FP8-rounded by the forward).
  const KvRowLayout layout = engine::kv_row_layout(KvFormat::F32, hd, 2 * pairs);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const bool with_entries = entries != nullptr && selected != nullptr && entries->n_entries > 0;
  count(0, static_cast<double>((std::min<int64_t>(start, window) + n) * layout.row_bytes +
                               (with_entries ? std::min<int64_t>(entries->n_entries, n * selected->cols()) : 0) *
                                   layout.row_bytes));
  Array out({n, int64_t{H} * hd}, stream_);
  const int64_t scratch_floats = attend_scratch_floats(n, H, hd);
  Array scratch;
  if (scratch_floats > 0) scratch = Array({scratch_floats}, stream_);
  check(cuda::attend(q.data(), n, H, layout, reinterpret_cast<const uint8_t*>(ring.data()), window,
                     reinterpret_cast<const uint8_t*>(kv.data()), position_.device,
                     with_entries ? reinterpret_cast<const uint8_t*>(entries->entries.data()) : nullptr,
                     with_entries ? entries->ratio : 0, with_entries ? selected->data() : nullptr,
                     with_entries ? static_cast<int>(selected->cols()) : 0, w_.tensor(sinks), scale,
                     w_.inv_freq(rope), pairs, out.data(), scratch.data(), stream_),
        "attend_v41");
  return out;
}

void CudaV41Ops::window_store(Array& ring, const Array& kv, int64_t, int window) const {
  const ScopedOp timed(profile_, "window_store", stream_);
  // fp32 records are the rows as they are, whatever their RoPE dims.
  const KvRowLayout layout = engine::kv_row_layout(KvFormat::F32, static_cast<int>(kv.cols()), 0);
  check(cuda::window_store(reinterpret_cast<uint8_t*>(ring.data()), window, layout, kv.data(),
                           static_cast<int>(kv.rows()), position_.device, stream_),
        "window_store");
}

CudaOps::Array CudaV41Ops::hc_sum(const Array& streams, const Mix* mix, int64_t first,
                                  const model::CommonConfig& c) const {
  const ScopedOp timed(profile_, "hc_sum", stream_);
  if (mix != nullptr) wait_for_mix(mix->data());
  Array out({streams.rows() - first, c.hidden_size}, stream_);
  check(cuda::hc_sum(streams.data(), static_cast<int>(streams.rows()), c.hc_mult, c.hidden_size,
                     mix != nullptr ? mix->data() : nullptr, static_cast<int>(first), out.data(), stream_),
        "hc_sum");
  return out;
}

CudaOps::Array CudaV41Ops::attend_block(const Array& q, const Array& kv, const Array& ring, int64_t start, int window,
                                        const Tensor& sinks, const engine::RopeTable& rope) const {
  const ScopedOp timed(profile_, "attend_block", stream_);
  const int hd = static_cast<int>(kv.cols()), H = static_cast<int>(q.cols() / hd), n = static_cast<int>(q.rows());
  const int pairs = static_cast<int>(rope.inv_freq().size());
  const KvRowLayout layout = engine::kv_row_layout(KvFormat::F32, hd, 2 * pairs);  // as attend_v41's rows
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  count(0, static_cast<double>((std::min<int64_t>(start, window) + n) * layout.row_bytes));
  Array out({n, int64_t{H} * hd}, stream_);
  const int64_t scratch_floats = attend_scratch_floats(n, H, hd);
  Array scratch;
  if (scratch_floats > 0) scratch = Array({scratch_floats}, stream_);
  check(cuda::attend_block(q.data(), n, H, layout, reinterpret_cast<const uint8_t*>(ring.data()), window,
                           reinterpret_cast<const uint8_t*>(kv.data()), position_.device, w_.tensor(sinks), scale,
                           w_.inv_freq(rope), pairs, out.data(), scratch.data(), stream_),
        "attend_block");
  return out;
}

CudaOps::Array CudaV41Ops::rows(const Array& x, int64_t first, int64_t n) const {
  if (first < 0 || n < 0 || first + n > x.rows()) throw Error("CUDA rows: outside the array");
  Array out({n, x.cols()}, stream_);
  if (n > 0)
    check(cudaMemcpyAsync(out.data(), x.data() + first * x.cols(), out.bytes(), cudaMemcpyDeviceToDevice, stream_),
          "rows");
  return out;
}

CudaOps::Array CudaV41Ops::stack_rows(std::span<const Array> parts) const {
  const int64_t width = parts.empty() ? 0 : parts.front().cols();
  int64_t n = 0;
  for (const Array& p : parts) {
    if (p.cols() != width) throw Error("CUDA stack_rows: parts of different widths");
    n += p.rows();
  }
  Array out({n, width}, stream_);
  int64_t at = 0;
  for (const Array& p : parts) {
    if (!p.empty())
      check(cudaMemcpyAsync(out.data() + at * width, p.data(), p.bytes(), cudaMemcpyDeviceToDevice, stream_),
            "stack_rows");
    at += p.rows();
  }
  return out;
}

CudaOps::Array CudaV41Ops::concat_cols(const Array& a, const Array& b) const {
  if (a.rows() != b.rows()) throw Error("CUDA concat_cols: arrays of different rows");
  const int64_t n = a.rows(), width = a.cols() + b.cols();
  Array out({n, width}, stream_);
  const size_t pitch = static_cast<size_t>(width) * sizeof(float);
  for (const auto& [part, at] : {std::pair{&a, int64_t{0}}, std::pair{&b, a.cols()}})
    if (!part->empty())
      check(cudaMemcpy2DAsync(out.data() + at, pitch, part->data(), static_cast<size_t>(part->cols()) * sizeof(float),
                              static_cast<size_t>(part->cols()) * sizeof(float), static_cast<size_t>(n),
                              cudaMemcpyDeviceToDevice, stream_),
            "concat_cols");
  return out;
}

CudaOps::Ids CudaV41Ops::argmax_rows(const Array& logits) const {
  const ScopedOp timed(profile_, "argmax_rows", stream_);
  Ids ids{{}, DeviceArray<int32_t>({logits.rows()}, stream_), {}};
  if (!logits.empty())
    check(cuda::argmax_rows(logits.data(), static_cast<int>(logits.rows()), logits.cols(), ids.device.data(), stream_),
          "argmax_rows");
  return ids;
}

}  // namespace frank::cuda
