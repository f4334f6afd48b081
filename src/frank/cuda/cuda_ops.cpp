#include "frank/cuda/cuda_ops.h"

#include <fmt/format.h>

#include <cmath>

#include "frank/core/error.h"
#include "frank/cuda/topk.cuh"

namespace frank::cuda {
namespace {

constexpr const char* kLaunch = "kernel launch";

// Grows a device array to at least `rows` rows of `cols`, keeping its contents (doubling, so a
// session's entries are copied O(log n) times).
void reserve_rows(DeviceArray<float>& a, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (a.rows() >= rows && !a.empty()) return;
  DeviceArray<float> bigger({std::max<int64_t>({rows, 2 * a.rows(), 1}), cols}, stream);
  if (!a.empty())
    check(cudaMemcpyAsync(bigger.data(), a.data(), a.bytes(), cudaMemcpyDeviceToDevice, stream), "grow entries");
  a = std::move(bigger);
}

}  // namespace

CudaOps::Ids CudaOps::upload_ids(std::span<const int32_t> ids) const {
  Ids out{std::vector<int32_t>(ids.begin(), ids.end()), DeviceArray<int32_t>({static_cast<int64_t>(ids.size())}, stream_)};
  out.device.copy_from_host(out.host.data());
  return out;
}

CudaOps::Array CudaOps::upload(const Tensor& host) const {
  Array a(host.shape, stream_);
  a.copy_from_host(host.data.data());
  return a;
}

Tensor CudaOps::download(const Array& a) const {
  Tensor t(a.shape());
  a.copy_to_host(t.data.data());
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return t;
}

CudaOps::Array CudaOps::embed(const Tensor& table, const Ids& ids, int N) const {
  const int64_t n = ids.device.numel(), D = table.cols();
  Array streams({n, N * D}, stream_);
  check(embed_streams(ids.device.data(), static_cast<int>(n), w_.tensor(table), static_cast<int>(D), N, streams.data(),
                      stream_),
        kLaunch);
  return streams;
}

std::pair<CudaOps::Mix, CudaOps::Array> CudaOps::hc_pre(const model::HyperConnectionWeights& hc, const Tensor& norm,
                                                        const Array& streams, const model::ModelConfig& c) const {
  const int64_t n = streams.rows();
  const int N = c.hc_mult, D = c.hidden_size;
  Mix mix({n, 2 * N + N * N}, stream_);
  Array input({n, D}, stream_);
  check(cuda::hc_pre(streams.data(), static_cast<int>(n), N, D, w_.tensor(hc.fn), w_.tensor(hc.base),
                     w_.tensor(hc.scale), c.hc_sinkhorn_iters, c.hc_eps, c.rms_norm_eps, w_.tensor(norm), mix.data(),
                     input.data(), stream_),
        kLaunch);
  return {std::move(mix), std::move(input)};
}

void CudaOps::hc_post(const Mix& mix, const Array& sublayer, Array& streams, const model::ModelConfig& c) const {
  check(cuda::hc_post(streams.data(), static_cast<int>(streams.rows()), c.hc_mult, c.hidden_size, mix.data(),
                      sublayer.data(), stream_),
        kLaunch);
}

CudaOps::Array CudaOps::hyper_head(const model::HyperConnectionWeights& hc, const Tensor& norm, const Array& streams,
                                   int64_t first, const model::ModelConfig& c) const {
  const int64_t n = streams.rows() - first;
  Array out({n, c.hidden_size}, stream_);
  check(hc_head(streams.data() + first * streams.cols(), static_cast<int>(n), c.hc_mult, c.hidden_size,
                w_.tensor(hc.fn), w_.tensor(hc.base), w_.tensor(hc.scale), c.hc_eps, c.rms_norm_eps, w_.tensor(norm),
                out.data(), stream_),
        kLaunch);
  return out;
}

CudaOps::Array CudaOps::linear(const Array& x, const LinearWeight& w) const {
  const DeviceWeights::Linear& l = w_.linear(w);
  if (x.cols() != l.cols)
    throw Error(fmt::format("CUDA linear: input of {} columns for a weight of {}", x.cols(), l.cols));
  Array y({x.rows(), l.rows}, stream_);
  check(cuda::linear(x.data(), l.cols, static_cast<int>(x.rows()), l.data, l.type, l.rows, l.cols, y.data(), l.rows,
                     stream_),
        kLaunch);
  return y;
}

CudaOps::Array CudaOps::grouped_linear(const Array& x, const LinearWeight& w, int groups) const {
  const DeviceWeights::Linear& l = w_.linear(w);
  const int64_t R = l.rows / groups, group_in = x.cols() / groups;
  if (group_in != l.cols) throw Error("CUDA grouped linear: group width does not match the weight");
  Array y({x.rows(), l.rows}, stream_);
  for (int g = 0; g < groups; ++g) {
    const void* rows = static_cast<const char*>(l.data) + static_cast<size_t>(g * R * l.cols) * l.element_bytes();
    check(cuda::linear(x.data() + g * group_in, x.cols(), static_cast<int>(x.rows()), rows, l.type, R, l.cols,
                       y.data() + g * R, l.rows, stream_),
          kLaunch);
  }
  return y;
}

void CudaOps::rms_norm(Array& x, int width, const Tensor* weight, float eps) const {
  check(cuda::rms_norm(x.data(), x.numel() / width, width, weight != nullptr ? w_.tensor(*weight) : nullptr, eps,
                       stream_),
        kLaunch);
}

void CudaOps::rope(Array& x, int heads, int dim, int64_t start, const engine::RopeTable& rope, bool inverse) const {
  check(cuda::rope(x.data(), static_cast<int>(x.rows()), heads, dim, w_.inv_freq(rope),
                   static_cast<int>(rope.inv_freq().size()), start, inverse, stream_),
        kLaunch);
}

void CudaOps::scale(Array& x, float s) const { check(cuda::scale(x.data(), x.numel(), s, stream_), kLaunch); }

void CudaOps::compress(DeviceCompressor& s, const engine::Compressor& comp, const Array& kv, const Array& gate,
                       int64_t start) const {
  const int ratio = comp.ratio(), dim = comp.dim(), width = comp.projection_width();
  const bool overlapping = width == 2 * dim;
  if (s.pending_kv.empty()) {
    s.pending_kv = Array({ratio, width}, stream_);
    s.pending_gate = Array({ratio, width}, stream_);
    if (overlapping) {
      s.overlap_kv = Array({ratio, dim}, stream_);
      s.overlap_gate = Array({ratio, dim}, stream_);
    }
  }
  reserve_rows(s.entries, (start + kv.rows()) / ratio, dim, stream_);
  const CompressorBuffers b{s.pending_kv.data(), s.pending_gate.data(), s.overlap_kv.data(), s.overlap_gate.data(),
                            s.entries.data()};
  const auto& w = comp.weights();
  check(compress_chunk(b, kv.data(), gate.data(), static_cast<int>(kv.rows()), start, ratio, dim, overlapping,
                       w_.tensor(w.position_bias), w_.tensor(w.norm), comp.eps(), w_.inv_freq(comp.rope()),
                       static_cast<int>(comp.rope().inv_freq().size()), stream_),
        kLaunch);
}

CudaOps::Selection CudaOps::index_select(const Array& q, const Array& w, const DeviceCompressor& keys,
                                         const engine::Compressor& comp, int64_t start, int k) const {
  const int64_t n = q.rows(), cols = (start + n) / comp.ratio();
  Selection selected({n, k}, stream_);
  if (cols == 0) {  // no entry yet: nothing to select
    selected.fill_bytes(0xff);
    return selected;
  }
  Array scores({n, cols}, stream_);
  check(indexer_scores(q.data(), w.data(), static_cast<int>(n), static_cast<int>(w.cols()), comp.dim(),
                       keys.entries.data(), start, comp.ratio(), static_cast<int>(cols), scores.data(), stream_),
        kLaunch);
  check(topk(2, scores.data(), static_cast<int>(n), static_cast<int>(cols), k, selected.data(), stream_), kLaunch);
  return selected;
}

CudaOps::Array CudaOps::attend(const Array& q, const Array& kv, const LayerState& state, const engine::Attention& a,
                               int64_t start, const Selection* selected) const {
  const model::ModelConfig& c = a.config();
  const int H = c.num_heads, hd = c.head_dim;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const int ratio = a.compressor() ? a.compressor()->ratio() : 0;
  Array out({q.rows(), int64_t{H} * hd}, stream_);
  check(cuda::attend(q.data(), static_cast<int>(q.rows()), H, hd, state.window.data(), c.sliding_window, kv.data(),
                     start, ratio > 0 ? state.compressor.entries.data() : nullptr, ratio,
                     selected != nullptr ? selected->data() : nullptr,
                     selected != nullptr ? static_cast<int>(selected->cols()) : 0, w_.tensor(a.weights().sinks), scale,
                     out.data(), stream_),
        kLaunch);
  return out;
}

void CudaOps::window_store(LayerState& state, const Array& kv, int64_t start, int window) const {
  check(cuda::window_store(state.window.data(), window, static_cast<int>(kv.cols()), kv.data(),
                           static_cast<int>(kv.rows()), start, stream_),
        kLaunch);
}

CudaOps::Array CudaOps::moe(const model::ModelConfig& c, const model::MoeWeights& w, bool hash_layer, const Array& x,
                            const Ids& ids, LayerState& /*state*/) const {
  const int n = static_cast<int>(x.rows()), E = c.n_routed_experts, k = c.experts_per_token, D = c.hidden_size;
  const int I = static_cast<int>(w.shared.gate.rows());
  if (!w.experts.empty() && w.experts.front().gate.rows() != I)
    throw Error("CUDA MoE: the shared expert's width differs from the routed experts'");
  const Array logits = linear(x, w.router);
  DeviceArray<int32_t> experts({n, k}, stream_);
  Array weights({n, k}, stream_);
  check(route(logits.data(), n, E, k, hash_layer ? nullptr : w_.tensor(w.selection_bias),
              hash_layer ? w_.tid2eid(w) : nullptr, ids.device.data(), c.routed_scaling_factor, experts.data(),
              weights.data(), stream_),
        kLaunch);
  Array hidden({n, k + 1, I}, stream_);
  Array out({n, D}, stream_);
  check(moe_experts(x.data(), n, D, I, experts.data(), weights.data(), k, E, w_.experts(w), c.swiglu_limit,
                    hidden.data(), out.data(), stream_),
        kLaunch);
  return out;
}

}  // namespace frank::cuda
