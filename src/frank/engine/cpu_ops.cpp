#include "frank/engine/cpu_ops.h"

#include <algorithm>
#include <cmath>

#include "frank/cpu/ops.h"
#include "frank/engine/indexer.h"
#include "frank/engine/moe.h"

namespace frank::engine {

Tensor CpuOps::embed(const Tensor& table, const Ids& ids, int N) const {
  const int64_t D = table.cols();
  Tensor streams({static_cast<int64_t>(ids.size()), N * D});
  for (size_t t = 0; t < ids.size(); ++t)
    for (int j = 0; j < N; ++j) std::copy_n(table.row(ids[t]), D, streams.row(static_cast<int64_t>(t)) + j * D);
  return streams;
}

std::pair<CpuOps::Mix, Tensor> CpuOps::hc_pre(const model::HyperConnectionWeights& hc, const Tensor& norm,
                                              const Tensor& streams, const model::ModelConfig& c) const {
  Mix mix = hc_map(hc, streams, c);
  Tensor input = hc_collapse(streams, &mix, norm, 0, c);
  return {std::move(mix), std::move(input)};
}

void CpuOps::hc_post(const Mix& mix, const Tensor& sublayer, Tensor& streams, const model::CommonConfig& c) const {
  for (int64_t t = 0; t < streams.rows(); ++t) hc_expand(mix[t], sublayer.row(t), c.hidden_size, streams.row(t));
}

CpuOps::Mix CpuOps::hc_map(const model::HyperConnectionWeights& hc, const Tensor& streams,
                           const model::CommonConfig& c) const {
  Mix mixes;
  for (int64_t t = 0; t < streams.rows(); ++t) mixes.push_back(hc_mapping(c, hc, streams.row(t)));
  return mixes;
}

Tensor CpuOps::hc_sum(const Tensor& streams, const Mix* mix, int64_t first, const model::CommonConfig& c) const {
  const int D = c.hidden_size;
  // Stream 0 as a collapse with weights (1, 0, ..): 1 * x + 0 * y is x exactly for finite streams.
  std::vector<float> stream_0(c.hc_mult, 0.0f);
  stream_0[0] = 1.0f;
  Tensor out({streams.rows() - first, int64_t{D}});
  for (int64_t t = first; t < streams.rows(); ++t)
    collapse_streams(streams.row(t), mix != nullptr ? (*mix)[t].pre : stream_0, D, out.row(t - first));
  return out;
}

Tensor CpuOps::hc_collapse(const Tensor& streams, const Mix* mix, const Tensor& norm, int64_t first,
                           const model::CommonConfig& c) const {
  Tensor out = hc_sum(streams, mix, first, c);
  rms_norm(out, c.hidden_size, &norm, c.rms_norm_eps);
  return out;
}

Tensor CpuOps::stream_mean(const Tensor& streams, const model::CommonConfig& c) const {
  const int64_t D = c.hidden_size, N = c.hc_mult;
  Tensor out({streams.rows(), D});
  for (int64_t t = 0; t < streams.rows(); ++t)
    for (int64_t d = 0; d < D; ++d) {
      float sum = 0.0f;  // in stream order, then one division, as torch's mean over the stream axis
      for (int64_t j = 0; j < N; ++j) sum += streams.row(t)[j * D + d];
      out.row(t)[d] = sum / static_cast<float>(N);
    }
  return out;
}

Tensor CpuOps::hyper_head(const model::HyperConnectionWeights& hc, const Tensor& norm, const Tensor& streams,
                          int64_t first, const model::ModelConfig& c) const {
  const int D = c.hidden_size;
  Tensor hidden({streams.rows() - first, int64_t{D}});
  for (int64_t t = first; t < streams.rows(); ++t) {
    engine::hyper_head(c, hc, streams.row(t), hidden.row(t - first));
    cpu::rms_norm(hidden.row(t - first), D, norm.data.data(), c.rms_norm_eps);
  }
  return hidden;
}

Tensor CpuOps::linear(const Tensor& x, const LinearWeight& w) const { return cpu::linear(x, w); }

std::vector<Tensor> CpuOps::linears(const Tensor& x, std::span<const LinearWeight* const> ws) const {
  std::vector<Tensor> ys;
  ys.reserve(ws.size());
  for (const LinearWeight* w : ws) ys.push_back(cpu::linear(x, *w));
  return ys;
}

Tensor CpuOps::linear_per_stream(const Tensor& x, const LinearWeight& w, int N) const {
  // [n, N*in] is [n*N, in] row-major: one row per stream.
  Tensor y = cpu::linear(Tensor({x.rows() * N, x.cols() / N}, x.data), w);
  y.shape = {x.rows(), N * y.cols()};
  return y;
}

void CpuOps::add_to_streams(Tensor& streams, const Tensor& x, int N) const {
  const int64_t D = x.cols();
  for (int64_t t = 0; t < x.rows(); ++t)
    for (int j = 0; j < N; ++j)
      for (int64_t d = 0; d < D; ++d) streams.row(t)[j * D + d] += x.row(t)[d];
}

Tensor CpuOps::grouped_linear(const Tensor& x, const LinearWeight& w, int groups) const {
  const int64_t n = x.rows(), R = w.rows() / groups, group_in = x.cols() / groups;
  Tensor y({n, w.rows()});
  for (int64_t t = 0; t < n; ++t)
    for (int g = 0; g < groups; ++g)
      cpu::linear_rows(x.row(t) + g * group_in, 1, w, g * R, (g + 1) * R, y.row(t) + g * R);
  return y;
}

void CpuOps::rms_norm(Tensor& x, int width, const Tensor* weight, float eps) const {
  for (int64_t i = 0; i < x.numel(); i += width)
    cpu::rms_norm(x.data.data() + i, width, weight != nullptr ? weight->data.data() : nullptr, eps);
}

void CpuOps::rope(Tensor& x, int heads, int dim, int64_t start, const RopeTable& rope, bool inverse,
                  int64_t stride) const {
  for (int64_t t = 0; t < x.rows(); ++t)
    for (int h = 0; h < heads; ++h) rope.apply(x.row(t) + int64_t{h} * dim, dim, (start + t) * stride, inverse);
}

void CpuOps::norm_rope(Tensor& x, int heads, int dim, const Tensor* weight, float eps, int64_t start,
                       const RopeTable& rope) const {
  rms_norm(x, dim, weight, eps);
  this->rope(x, heads, dim, start, rope, /*inverse=*/false);
}

void CpuOps::scale(Tensor& x, float s) const {
  for (auto& v : x.data) v *= s;
}

void CpuOps::fake_quant(Tensor& x, int width, FakeQuant grid, int block) const {
  for (int64_t i = 0; i < x.numel(); i += width) engine::fake_quant(x.data.data() + i, width, grid, block);
}

void CpuOps::compress(CompressorState& state, const Compressor& compressor, const Tensor& kv, const Tensor& gate,
                      int64_t /*start*/) const {
  for (int64_t t = 0; t < kv.rows(); ++t) compressor.push(state, kv.row(t), gate.row(t));
}

CpuOps::Selection CpuOps::index_select(const Tensor& q, const Tensor& w, const CompressorState& keys,
                                       const Compressor& compressor, int64_t start, int k) const {
  const int heads = static_cast<int>(w.cols()), dim = compressor.dim();
  Selection selected;
  for (int64_t t = 0; t < q.rows(); ++t) {
    const int64_t visible = (start + t + 1) / compressor.ratio();
    const auto scores = indexer_scores(q.row(t), w.row(t), heads, dim, keys.entries.data(), visible);
    if (dump_ != nullptr) dump_->write(start + t, k, scores);
    selected.push_back(top_k_indices(scores, k));
  }
  return selected;
}

namespace {

// Per token t at pos = start + t: the key rows `keys(t, pos, keys)` gives; every head attends to
// them with its sink, and the K=V rows' RoPE is undone on its output at pos. [n, heads * head_dim],
// heads = q.cols() / head_dim.
template <class Keys>
Tensor attend_keys(const Tensor& q, int64_t hd, int64_t start, const Tensor& sinks, const RopeTable& rope,
                   Keys&& gather) {
  const int64_t H = q.cols() / hd;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  Tensor heads({q.rows(), H * hd});
  std::vector<const float*> keys;
  for (int64_t t = 0; t < q.rows(); ++t) {
    const int64_t pos = start + t;
    keys.clear();
    gather(t, pos, keys);
    for (int64_t h = 0; h < H; ++h) {
      attend_with_sink(q.row(t) + h * hd, keys, sinks.data[h], static_cast<int>(hd), scale, heads.row(t) + h * hd);
      rope.apply(heads.row(t) + h * hd, static_cast<int>(hd), pos, /*inverse=*/true);
    }
  }
  return heads;
}

// attend_keys over each token's window rows (pos-W, pos], oldest first (earlier ones from the ring,
// the chunk's own from kv), then the entry rows `entries(t, pos, keys)` appends.
template <class Entries>
Tensor attend_rows(const Tensor& q, const Tensor& kv, const std::vector<float>& ring, int64_t start, int window,
                   const Tensor& sinks, const RopeTable& rope, Entries&& entries) {
  const int64_t hd = kv.cols();
  return attend_keys(q, hd, start, sinks, rope, [&](int64_t t, int64_t pos, std::vector<const float*>& keys) {
    for (int64_t p = std::max<int64_t>(0, pos - window + 1); p <= pos; ++p)
      keys.push_back(p < start ? ring.data() + (p % window) * hd : kv.row(p - start));
    entries(t, pos, keys);
  });
}

}  // namespace

Tensor CpuOps::attend(const Tensor& q, const Tensor& kv, LayerState& state, const Attention& a, int64_t start,
                      const Selection* selected) const {
  const int64_t hd = a.config().head_dim;
  const float* entries = state.compressor.entries.data();
  Tensor heads = attend_rows(q, kv, state.window, start, a.config().sliding_window, a.weights().sinks, a.rope(),
                             [&](int64_t t, int64_t pos, std::vector<const float*>& keys) {
                               if (selected != nullptr) {
                                 for (int64_t e : (*selected)[t]) keys.push_back(entries + e * hd);
                               } else if (a.compressor()) {
                                 for (int64_t e = 0; e < (pos + 1) / a.compressor()->ratio(); ++e)
                                   keys.push_back(entries + e * hd);
                               }
                             });
  store_window_rows(state.window, kv, start, a.config().sliding_window);
  return heads;
}

Tensor CpuOps::attend_v41(const Tensor& q, const Tensor& kv, const std::vector<float>& ring, int64_t start, int window,
                          const Tensor& sinks, const RopeTable& rope, const V41Source* entries,
                          const Selection* selected) const {
  const int64_t hd = kv.cols();
  return attend_rows(q, kv, ring, start, window, sinks, rope, [&](int64_t t, int64_t, std::vector<const float*>& keys) {
    if (entries == nullptr || selected == nullptr) return;
    for (int64_t e : (*selected)[t]) keys.push_back(entries->entries.data() + e * hd);
  });
}

Tensor CpuOps::attend_block(const Tensor& q, const Tensor& kv, const std::vector<float>& ring, int64_t start,
                            int window, const Tensor& sinks, const RopeTable& rope) const {
  const int64_t hd = kv.cols();
  return attend_keys(q, hd, start, sinks, rope, [&](int64_t, int64_t, std::vector<const float*>& keys) {
    for (int64_t p = std::max<int64_t>(0, start - window); p < start; ++p) keys.push_back(ring.data() + (p % window) * hd);
    for (int64_t r = 0; r < kv.rows(); ++r) keys.push_back(kv.row(r));
  });
}

void store_window_rows(std::vector<float>& ring, const Tensor& kv, int64_t start, int window) {
  const int64_t n = kv.rows(), hd = kv.cols();
  for (int64_t t = std::max<int64_t>(0, n - window); t < n; ++t)
    std::copy_n(kv.row(t), hd, ring.begin() + ((start + t) % window) * hd);
}

void CpuOps::window_store(std::vector<float>& ring, const Tensor& kv, int64_t start, int window) const {
  store_window_rows(ring, kv, start, window);
}

void CpuOps::keep_call_record(LayerState& state, Tensor comp_kv, Tensor comp_gate, Tensor index_kv,
                              Tensor index_gate) const {
  state.last_call.compressor_kv = std::move(comp_kv);
  state.last_call.compressor_gate = std::move(comp_gate);
  state.last_call.indexer_kv = std::move(index_kv);
  state.last_call.indexer_gate = std::move(index_gate);
}

Tensor CpuOps::moe(const model::ModelConfig& c, const model::MoeWeights& w, bool hash_layer, const Tensor& x,
                   const Ids& ids, LayerState& state) const {
  state.last_call.experts.clear();
  const int layer = forced_ != nullptr ? moe_layer(*forced_model_, w) : -1;
  return moe_forward(c, w, hash_layer, x, ids, &state.last_call.experts, {},
                     layer >= 0 ? forced_->layer(layer) : nullptr);
}

}  // namespace frank::engine
