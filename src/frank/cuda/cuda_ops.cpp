#include "frank/cuda/cuda_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "frank/core/error.h"
#include "frank/cuda/hybrid_moe.cuh"
#include "frank/cuda/stream_add.cuh"
#include "frank/cuda/topk.cuh"

namespace frank::cuda {
namespace {

const engine::Compressor* pointer(const std::optional<engine::Compressor>& c) { return c ? &*c : nullptr; }

// A call record's buffer of `rows` rows; its contents need not survive (each call overwrites them).
void reserve_record(DeviceArray<float>& a, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (a.rows() < rows || a.cols() != cols) a = DeviceArray<float>({rows, cols}, stream);
}

}  // namespace

KvRowLayout entry_layout(const DeviceCompressor& s, const engine::Compressor& comp) {
  return engine::kv_row_layout(s.entry_format, comp.dim(), 2 * static_cast<int>(comp.rope().inv_freq().size()));
}

KvRowLayout kv_layout(const model::ModelConfig& c, KvFormat format) {
  return engine::kv_row_layout(format, c.head_dim, c.rope_dim);
}

DeviceLayerState new_layer_state(const model::ModelConfig& c, KvFormat format, cudaStream_t stream) {
  DeviceLayerState layer;
  layer.kv = kv_layout(c, format);
  layer.compressor.entry_format = format;
  layer.window = DeviceArray<uint8_t>({c.sliding_window, layer.kv.row_bytes}, stream);
  layer.window.fill_bytes(0);
  return layer;
}

void CudaOps::count(double weight_bytes, double state_bytes) const {
  if (traffic_ == nullptr) return;
  traffic_->weight_bytes += weight_bytes;
  traffic_->state_bytes += state_bytes;
}

CudaOps::Ids CudaOps::upload_ids(std::span<const int32_t> ids, const engine::ForcedRouting* forced) const {
  Ids out{std::vector<int32_t>(ids.begin(), ids.end()),
          DeviceArray<int32_t>({static_cast<int64_t>(ids.size())}, stream_), {}};
  out.device.copy_from_host(out.host.data());
  if (forced != nullptr) {
    out.forced_experts = DeviceArray<int32_t>({std::ssize(forced->experts)}, stream_);
    out.forced_experts.copy_from_host(forced->experts.data());
  }
  return out;
}

Tensor CudaOps::download(const Array& a) const {
  Tensor t(a.shape());
  a.copy_to_host(t.data.data());
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return t;
}

CudaOps::Array CudaOps::embed(const Tensor& table, const Ids& ids, int N) const {
  const ScopedOp timed(profile_, "embed", stream_);
  const int64_t n = ids.device.numel(), D = table.cols();
  Array streams({n, N * D}, stream_);
  count(static_cast<double>(n * D) * 4, 0);
  check(embed_streams(ids.device.data(), static_cast<int>(n), w_.tensor(table), static_cast<int>(D), N, streams.data(),
                      stream_),
        "embed");
  return streams;
}

std::pair<CudaOps::Mix, CudaOps::Array> CudaOps::hc_pre(const model::HyperConnectionWeights& hc, const Tensor& norm,
                                                        const Array& streams, const model::ModelConfig& c) const {
  const ScopedOp timed(profile_, "hc_pre", stream_);
  const int64_t n = streams.rows();
  const int N = c.hc_mult, D = c.hidden_size;
  Mix mix({n, 2 * N + N * N}, stream_);
  Array input({n, D}, stream_);
  count(static_cast<double>(hc.fn.numel()) * 4, 0);
  check(cuda::hc_pre(streams.data(), static_cast<int>(n), N, D, w_.tensor(hc.fn), w_.tensor(hc.base),
                     w_.tensor(hc.scale), c.hc_sinkhorn_iters, c.hc_eps, c.rms_norm_eps, w_.tensor(norm), mix.data(),
                     input.data(), stream_),
        "hc_pre");
  return {std::move(mix), std::move(input)};
}

void CudaOps::hc_post(const Mix& mix, const Array& sublayer, Array& streams, const model::CommonConfig& c) const {
  const ScopedOp timed(profile_, "hc_post", stream_);
  check(cuda::hc_post(streams.data(), static_cast<int>(streams.rows()), c.hc_mult, c.hidden_size, mix.data(),
                      sublayer.data(), stream_),
        "hc_post");
}

CudaOps::Array CudaOps::hyper_head(const model::HyperConnectionWeights& hc, const Tensor& norm, const Array& streams,
                                   int64_t first, const model::ModelConfig& c) const {
  const ScopedOp timed(profile_, "hyper_head", stream_);
  const int64_t n = streams.rows() - first;
  Array out({n, c.hidden_size}, stream_);
  count(static_cast<double>(hc.fn.numel()) * 4, 0);
  check(hc_head(streams.data() + first * streams.cols(), static_cast<int>(n), c.hc_mult, c.hidden_size,
                w_.tensor(hc.fn), w_.tensor(hc.base), w_.tensor(hc.scale), c.hc_eps, c.rms_norm_eps, w_.tensor(norm),
                out.data(), stream_),
        "hyper_head");
  return out;
}

CudaOps::Array CudaOps::linear(const Array& x, const LinearWeight& w) const {
  const ScopedOp timed(profile_, profile_ ? fmt::format("linear {}x{}", w.rows(), w.cols()) : "", stream_);
  const DeviceWeights::Linear& l = w_.linear(w);
  // No row (a V4.1 call that closes no group): an empty array has no column count to check.
  if (x.rows() == 0) return Array({0, l.rows}, stream_);
  if (x.cols() != l.cols)
    throw Error(fmt::format("CUDA linear: input of {} columns for a weight of {}", x.cols(), l.cols));
  Array y({x.rows(), l.rows}, stream_);
  count(static_cast<double>(l.bytes()), 0);
  check(cuda::linear(x.data(), l.cols, static_cast<int>(x.rows()), l.data, l.type, l.rows, l.cols, y.data(), l.rows,
                     stream_),
        "linear");
  return y;
}

std::vector<CudaOps::Array> CudaOps::linears(const Array& x, std::span<const LinearWeight* const> ws) const {
  const ScopedOp timed(profile_, profile_ ? fmt::format("linears x{}", ws.size()) : "", stream_);
  std::vector<Array> ys;
  std::vector<LinearOutput> outputs;
  std::vector<const DeviceWeights::Linear*> ls;
  for (const LinearWeight* w : ws) ls.push_back(&w_.linear(*w));
  const bool one_launch = ws.size() <= kMaxLinearOutputs &&
                          std::all_of(ls.begin(), ls.end(), [&](auto* l) { return l->type == ls.front()->type; });
  for (const DeviceWeights::Linear* l : ls) {
    if (x.cols() != l->cols)
      throw Error(fmt::format("CUDA linears: input of {} columns for a weight of {}", x.cols(), l->cols));
    if (!one_launch) {
      ys.push_back(linear(x, *ws[ys.size()]));
      continue;
    }
    ys.emplace_back(std::vector<int64_t>{x.rows(), l->rows}, stream_);
    outputs.push_back({l->data, l->rows, ys.back().data(), l->rows});
    count(static_cast<double>(l->bytes()), 0);
  }
  if (one_launch && !ls.empty())
    check(cuda::linears(x.data(), x.cols(), static_cast<int>(x.rows()), x.cols(), ls.front()->type, outputs.data(),
                        static_cast<int>(outputs.size()), stream_),
          "linears");
  return ys;
}

CudaOps::Array CudaOps::linear_per_stream(const Array& x, const LinearWeight& w, int N) const {
  const ScopedOp timed(profile_, "linear_per_stream", stream_);
  const DeviceWeights::Linear& l = w_.linear(w);
  if (x.cols() != N * l.cols)
    throw Error(fmt::format("CUDA linear per stream: rows of {} columns for {} streams of {}", x.cols(), N, l.cols));
  // [n, N*in] is [n*N, in] row-major: one row per stream.
  Array y({x.rows(), N * l.rows}, stream_);
  count(static_cast<double>(l.bytes()), 0);
  check(cuda::linear(x.data(), l.cols, static_cast<int>(x.rows() * N), l.data, l.type, l.rows, l.cols, y.data(),
                     l.rows, stream_),
        "linear per stream");
  return y;
}

void CudaOps::add_to_streams(Array& streams, const Array& x, int N) const {
  const ScopedOp timed(profile_, "add_to_streams", stream_);
  if (streams.rows() != x.rows() || streams.cols() != N * x.cols())
    throw Error("CUDA add_to_streams: one row of the stream width per token is needed");
  check(cuda::add_to_streams(streams.data(), x.data(), x.rows(), N, static_cast<int>(x.cols()), stream_),
        "add_to_streams");
}

CudaOps::Array CudaOps::grouped_linear(const Array& x, const LinearWeight& w, int groups) const {
  const ScopedOp timed(profile_, profile_ ? fmt::format("grouped_linear {}x{}", w.rows(), w.cols()) : "", stream_);
  const DeviceWeights::Linear& l = w_.linear(w);
  const int64_t R = l.rows / groups, group_in = x.cols() / groups;
  if (group_in != l.cols || R * groups != l.rows)
    throw Error("CUDA grouped linear: the groups do not divide the weight and the input alike");
  Array y({x.rows(), l.rows}, stream_);
  count(static_cast<double>(l.bytes()), 0);
  check(cuda::linear_grouped(x.data(), x.cols(), static_cast<int>(x.rows()), l.data, l.type, groups, R, l.cols,
                             y.data(), l.rows, stream_),
        "grouped_linear");
  return y;
}

void CudaOps::rms_norm(Array& x, int width, const Tensor* weight, float eps) const {
  const ScopedOp timed(profile_, "rms_norm", stream_);
  if (x.empty()) return;
  check(cuda::rms_norm(x.data(), x.numel() / width, width, weight != nullptr ? w_.tensor(*weight) : nullptr, eps,
                       stream_),
        "rms_norm");
}

void CudaOps::rope(Array& x, int heads, int dim, int64_t, const engine::RopeTable& rope, bool inverse,
                   int64_t stride) const {
  const ScopedOp timed(profile_, "rope", stream_);
  if (x.empty()) return;
  check(cuda::rope(x.data(), static_cast<int>(x.rows()), heads, dim, w_.inv_freq(rope),
                   static_cast<int>(rope.inv_freq().size()), position_.device, inverse, stream_, stride),
        "rope");
}

void CudaOps::norm_rope(Array& x, int heads, int dim, const Tensor* weight, float eps, int64_t,
                        const engine::RopeTable& rope) const {
  const ScopedOp timed(profile_, "norm_rope", stream_);
  if (x.cols() != int64_t{heads} * dim)
    throw Error(fmt::format("CUDA norm_rope: rows of {} values for {} heads of {}", x.cols(), heads, dim));
  check(cuda::rms_norm_rope(x.data(), static_cast<int>(x.rows()), heads, dim,
                            weight != nullptr ? w_.tensor(*weight) : nullptr, eps, w_.inv_freq(rope),
                            static_cast<int>(rope.inv_freq().size()), position_.device, stream_),
        "norm_rope");
}

void CudaOps::scale(Array& x, float s) const {
  const ScopedOp timed(profile_, "scale", stream_);
  check(cuda::scale(x.data(), x.numel(), s, stream_), "scale");
}

void CudaOps::prepare(DeviceCompressor& s, const engine::Compressor& comp) const {
  const int ratio = comp.ratio(), dim = comp.dim(), width = comp.projection_width();
  if (s.pending_kv.empty()) {
    s.pending_kv = Array({ratio, width}, stream_);
    s.pending_gate = Array({ratio, width}, stream_);
    if (width == 2 * dim) {
      s.overlap_kv = Array({ratio, dim}, stream_);
      s.overlap_gate = Array({ratio, dim}, stream_);
    }
  }
  reserve_rows(s.entries, position_.end_bound / ratio, entry_layout(s, comp).row_bytes, stream_);
}

void CudaOps::prepare(LayerState& state, const engine::Attention& a) const {
  if (a.compressor()) prepare(state.compressor, *a.compressor());
  if (a.index_compressor()) prepare(state.indexer, *a.index_compressor());
  if (record_tokens_ == 0) return;
  DeviceCallRecord& r = state.last_call;
  for (const auto& [comp, kv, gate] : {std::tuple{pointer(a.compressor()), &r.compressor_kv, &r.compressor_gate},
                                       std::tuple{pointer(a.index_compressor()), &r.indexer_kv, &r.indexer_gate}})
    if (comp)
      for (Array* record : {kv, gate}) reserve_record(*record, record_tokens_, comp->projection_width(), stream_);
}

void CudaOps::keep_call_record(LayerState& state, Array comp_kv, Array comp_gate, Array index_kv,
                               Array index_gate) const {
  if (record_tokens_ == 0) return;
  DeviceCallRecord& r = state.last_call;
  for (const auto& [from, to] : {std::pair{&comp_kv, &r.compressor_kv}, std::pair{&comp_gate, &r.compressor_gate},
                                 std::pair{&index_kv, &r.indexer_kv}, std::pair{&index_gate, &r.indexer_gate}}) {
    if (from->empty()) continue;
    if (from->rows() > record_tokens_)
      throw Error(fmt::format("CUDA: a recorded call of {} tokens, more than the {} recorded", from->rows(),
                              record_tokens_));
    reserve_record(*to, record_tokens_, from->cols(), stream_);  // an eager call: not prepared before
    check(cudaMemcpyAsync(to->data(), from->data(), from->bytes(), cudaMemcpyDeviceToDevice, stream_),
          "record the call's projections");
  }
}

void CudaOps::replay_call(LayerState& state, const engine::Attention& a, int64_t keep) const {
  if (keep == 0) return;
  const DeviceCallRecord& r = state.last_call;
  const int64_t start = position_.end_bound - keep;
  for (const auto& [comp, compressor, kv, gate] :
       {std::tuple{pointer(a.compressor()), &state.compressor, &r.compressor_kv, &r.compressor_gate},
        std::tuple{pointer(a.index_compressor()), &state.indexer, &r.indexer_kv, &r.indexer_gate}}) {
    if (!comp) continue;
    if (kv->rows() < keep) throw Error("CUDA rewind: the last call's record does not cover the tokens to keep");
    compress(*compressor, *comp, kv->data(), gate->data(), keep, start);
  }
}

void CudaOps::compress(DeviceCompressor& s, const engine::Compressor& comp, const Array& kv, const Array& gate,
                       int64_t start) const {
  compress(s, comp, kv.data(), gate.data(), kv.rows(), start);
}

void CudaOps::compress(DeviceCompressor& s, const engine::Compressor& comp, const float* kv, const float* gate,
                       int64_t n, int64_t start) const {
  const ScopedOp timed(profile_, "compress", stream_);
  const int ratio = comp.ratio(), dim = comp.dim(), width = comp.projection_width();
  if (start + n > position_.end_bound)
    throw Error(fmt::format("CUDA compress: a chunk ending at {} past the step's bound {}", start + n,
                            position_.end_bound));
  prepare(s, comp);
  const KvRowLayout entry = entry_layout(s, comp);
  count(0, 2.0 * ratio * width * 4);  // the pending projections
  const CompressorBuffers b{s.pending_kv.data(), s.pending_gate.data(), s.overlap_kv.data(), s.overlap_gate.data(),
                            s.entries.data()};
  const auto& w = comp.weights();
  check(compress_chunk(b, kv, gate, static_cast<int>(n), position_.device, ratio, dim,
                       width == 2 * dim, w_.tensor(w.position_bias), w_.tensor(w.norm), comp.eps(),
                       w_.inv_freq(comp.rope()), entry.rope_dims / 2, entry, stream_),
        "compress");
}

CudaOps::Selection CudaOps::index_select(const Array& q, const Array& w, const DeviceCompressor& keys,
                                         const engine::Compressor& comp, int64_t, int k) const {
  const ScopedOp timed(profile_, "index_select", stream_);
  // Every column any position up to the bound could see; those past a token's view score -inf.
  const int64_t n = q.rows(), cols = position_.end_bound / comp.ratio();
  Selection selected({n, k}, stream_);
  if (cols == 0) {  // no entry yet: nothing to select
    selected.fill_bytes(0xff);
    return selected;
  }
  Array scores({n, cols}, stream_);
  if (keys.entry_format != KvFormat::F32) throw Error("CUDA index_select: the indexer's keys must be fp32");
  count(0, static_cast<double>(cols * comp.dim()) * 4);  // every index key
  check(indexer_scores(q.data(), w.data(), static_cast<int>(n), static_cast<int>(w.cols()), comp.dim(),
                       reinterpret_cast<const float*>(keys.entries.data()), position_.device, comp.ratio(),
                       static_cast<int>(cols), scores.data(), stream_),
        "index_select");
  check(topk(3, scores.data(), static_cast<int>(n), static_cast<int>(cols), k, selected.data(), stream_),
        "index_select (top-k)");
  return selected;
}

CudaOps::Array CudaOps::attend(const Array& q, const Array& kv, LayerState& state, const engine::Attention& a,
                               int64_t start, const Selection* selected) const {
  const ScopedOp timed(profile_, "attend", stream_);
  const model::ModelConfig& c = a.config();
  const int H = c.num_heads, hd = c.head_dim;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const int ratio = a.compressor() ? a.compressor()->ratio() : 0;
  const KvRowLayout& layout = state.kv;
  Array out({q.rows(), int64_t{H} * hd}, stream_);
  // Distinct rows read: the window's, and the entries (HCA: every visible one; CSA: the chosen ones).
  const int64_t n = q.rows(), entries = ratio > 0 ? (start + n) / ratio : 0;
  const int64_t entry_rows = selected != nullptr ? std::min(entries, n * selected->cols()) : entries;
  count(0, static_cast<double>((std::min<int64_t>(start, c.sliding_window) + n + entry_rows) * layout.row_bytes));
  // The chunk's own rows as they will be stored (fp32 records are the rows themselves).
  DeviceArray<uint8_t> encoded;
  const uint8_t* chunk_rows = reinterpret_cast<const uint8_t*>(kv.data());
  if (layout.format != KvFormat::F32) {
    encoded = DeviceArray<uint8_t>({n, layout.row_bytes}, stream_);
    check(kv_encode(kv.data(), static_cast<int>(n), layout, encoded.data(), stream_), "attend (encode the chunk)");
    chunk_rows = encoded.data();
  }
  const int64_t scratch_floats = attend_scratch_floats(static_cast<int>(n), H, hd);
  Array scratch;
  if (scratch_floats > 0) scratch = Array({scratch_floats}, stream_);
  check(cuda::attend(q.data(), static_cast<int>(q.rows()), H, layout, state.window.data(), c.sliding_window, chunk_rows,
                     position_.device, ratio > 0 ? state.compressor.entries.data() : nullptr, ratio,
                     selected != nullptr ? selected->data() : nullptr,
                     selected != nullptr ? static_cast<int>(selected->cols()) : 0, w_.tensor(a.weights().sinks), scale,
                     w_.inv_freq(a.rope()), static_cast<int>(a.rope().inv_freq().size()), out.data(), scratch.data(),
                     stream_, {state.window.data(), kv.data()}),
        "attend");
  return out;
}

CudaOps::Array CudaOps::moe(const model::ModelConfig& c, const model::MoeWeights& w, bool hash_layer, const Array& x,
                            const Ids& ids, LayerState& state) const {
  return moe_forward(c, w, hash_layer, x, ids, 1.0f, &state.last_experts);
}

CudaOps::Array CudaOps::moe_forward(const model::CommonConfig& c, const model::MoeWeights& w, bool hash_layer,
                                    const Array& x, const Ids& ids, float gate_temp,
                                    DeviceArray<int32_t>* last_experts) const {
  const ScopedOp timed(profile_, "moe", stream_);
  const int n = static_cast<int>(x.rows()), E = c.n_routed_experts, k = c.experts_per_token, D = c.hidden_size;
  const int I = static_cast<int>(w.shared.gate.rows());
  if (!w.experts.empty() && w.experts.front().gate.rows() != I)
    throw Error("CUDA MoE: the shared expert's width differs from the routed experts'");
  const ExpertTables& tables = w_.experts(w);
  CpuExperts* cpu = w_.cpu_experts();
  const int cpu_layer = cpu != nullptr ? cpu->cpu_layer(w) : -1;
  // Allocated before route: a graph allocation node between route and the expert kernels would
  // keep them from overlapping (programmatic dependent launch).
  DeviceArray<int32_t> experts({n, k}, stream_);
  Array weights({n, k}, stream_);
  Array hidden({moe_hidden_floats(n, k, D, I, tables)}, stream_);
  Array out({n, D}, stream_);
  // With a branch, every expert on the GPU and none EXL3: the shared expert, which needs no
  // routing, runs apart on the branch (on half the GPU's blocks) beside the router and route (a
  // 2 MB linear and a small kernel: more latency than bytes), so that the memory does not sit idle
  // while they run; the routed experts' pass adds its sum to the shared expert's output, its down
  // kernel after the branch. Issued in order on one stream, the split would cost two more kernels
  // than the one pass of moe_experts (~6 us a layer on an H200): without a branch, that pass.
  const BranchStream* branch = branches_.empty() ? nullptr : &branches_.front();
  const bool shared_apart = branch != nullptr && cpu_layer < 0 && tables.type != WeightType::Exl3;
  Array shared_hidden;
  if (shared_apart) {
    shared_hidden = Array({moe_hidden_floats(n, 0, D, I, tables)}, stream_);
    branch->fork(stream_);
    check(moe_shared_expert(x.data(), n, D, I, E, tables, c.swiglu_limit, 2, shared_hidden.data(), out.data(),
                            branch->stream()),
          "moe (shared expert)");
    branch->finish();
  }
  const Array logits = linear(x, w.router);
  // Routing replay: this layer's slice of the step's forced experts (the MTP block's layer has none).
  const int forced_layer =
      forced_model_ != nullptr && !ids.forced_experts.empty() ? engine::moe_layer(*forced_model_, w) : -1;
  const int32_t* forced = forced_layer >= 0 ? ids.forced_experts.data() + int64_t{forced_layer} * n * k : nullptr;
  check(route(logits.data(), n, E, k, hash_layer ? nullptr : w_.tensor(w.selection_bias),
              hash_layer ? w_.tid2eid(w) : nullptr, ids.device.data(), c.routed_scaling_factor, experts.data(),
              weights.data(), stream_, forced, gate_temp),
        "moe (route)");
  if (shared_apart) {
    check(moe_routed_experts(x.data(), n, D, I, experts.data(), weights.data(), k, E, tables, c.swiglu_limit,
                             branch->finished_event(), hidden.data(), out.data(), stream_),
          "moe (routed experts)");
  } else {
    // Experts split by a plan (cpu_experts.h): the host's worker gets the routing while the GPU runs
    // its share, and the GPU waits for the worker's sum on the device (capturable: no host call).
    DeviceArray<int32_t> gpu_share;
    if (cpu_layer >= 0) {
      cpu->hand_over(cpu_layer, x.data(), n, experts.data(), weights.data(), k, stream_);
      w_.wait_for_expert_copies();  // the cache's entries and flags read below (a graph's launcher waits before)
      gpu_share = DeviceArray<int32_t>({n, k}, stream_);
      check(drop_cpu_experts(experts.data(), n * k, w_.cpu_homes(w), E, gpu_share.data(), stream_),
            "moe (GPU share)");
      cpu->gpu_share_begin(stream_);
    }
    check(moe_experts(x.data(), n, D, I, cpu_layer >= 0 ? gpu_share.data() : experts.data(), weights.data(), k, E,
                      tables, c.swiglu_limit, hidden.data(), out.data(), stream_),
          "moe (experts)");
    if (cpu_layer >= 0) {
      cpu->gpu_share_end(stream_);
      cpu->add_sum(out.data(), n, stream_);
    }
  }
  if (keep_routing_ && last_experts != nullptr) *last_experts = std::move(experts);
  return out;
}

}  // namespace frank::cuda
