#include "frank/engine/hyper_connection.h"

#include <vector>

#include "frank/cpu/ops.h"

namespace frank::engine {
namespace {

// m = fn · (x * rsqrt(mean(x^2) + eps)) over the flattened N*D streams (normalise, then project).
std::vector<float> mix_logits(const model::CommonConfig& c, const Tensor& fn, const float* streams) {
  const int64_t width = int64_t{c.hc_mult} * c.hidden_size;
  std::vector<float> normed(streams, streams + width);
  cpu::rms_norm(normed.data(), width, nullptr, c.rms_norm_eps);
  std::vector<float> m(fn.rows());
  cpu::linear(normed.data(), 1, fn, m.data());
  return m;
}

}  // namespace

void sinkhorn(float* comb, int n, int iters, float eps) {
  auto normalise_rows = [&] {
    for (int j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int k = 0; k < n; ++k) sum += comb[j * n + k];
      for (int k = 0; k < n; ++k) comb[j * n + k] /= sum + eps;
    }
  };
  auto normalise_columns = [&] {
    for (int k = 0; k < n; ++k) {
      float sum = 0.0f;
      for (int j = 0; j < n; ++j) sum += comb[j * n + k];
      for (int j = 0; j < n; ++j) comb[j * n + k] /= sum + eps;
    }
  };
  for (int j = 0; j < n; ++j) {
    cpu::softmax(comb + j * n, n);
    for (int k = 0; k < n; ++k) comb[j * n + k] += eps;
  }
  normalise_columns();
  for (int it = 1; it < iters; ++it) {
    normalise_rows();
    normalise_columns();
  }
}

HyperConnectionMix hc_mapping(const model::CommonConfig& c, const model::HyperConnectionWeights& w,
                              const float* streams) {
  const int N = c.hc_mult;
  const auto m = mix_logits(c, w.fn, streams);
  const float* base = w.base.data.data();
  const float* scale = w.scale.data.data();
  HyperConnectionMix mix{std::vector<float>(N), std::vector<float>(N), std::vector<float>(N * N)};
  for (int i = 0; i < N; ++i) {
    mix.pre[i] = cpu::sigmoid(m[i] * scale[0] + base[i]) + c.hc_eps;
    mix.post[i] = 2.0f * cpu::sigmoid(m[N + i] * scale[1] + base[N + i]);
  }
  for (int i = 0; i < N * N; ++i) mix.comb[i] = m[2 * N + i] * scale[2] + base[2 * N + i];
  sinkhorn(mix.comb.data(), N, c.hc_sinkhorn_iters, c.hc_eps);
  return mix;
}

void collapse_streams(const float* streams, const std::vector<float>& weights, int dim, float* out) {
  const int n = static_cast<int>(weights.size());
  for (int d = 0; d < dim; ++d) {
    double s = 0.0;
    for (int j = 0; j < n; ++j) s += static_cast<double>(weights[j]) * streams[int64_t{j} * dim + d];
    out[d] = static_cast<float>(s);
  }
}

void hc_expand(const HyperConnectionMix& mix, const float* sublayer, int dim, float* streams) {
  const int n = static_cast<int>(mix.post.size());
  std::vector<float> old(streams, streams + int64_t{n} * dim);
  for (int k = 0; k < n; ++k)
    for (int d = 0; d < dim; ++d) {
      double s = 0.0;
      for (int j = 0; j < n; ++j) s += static_cast<double>(mix.comb[j * n + k]) * old[int64_t{j} * dim + d];
      streams[int64_t{k} * dim + d] = mix.post[k] * sublayer[d] + static_cast<float>(s);
    }
}

void hyper_head(const model::CommonConfig& c, const model::HyperConnectionWeights& w, const float* streams, float* out) {
  const int N = c.hc_mult;
  const auto m = mix_logits(c, w.fn, streams);
  std::vector<float> pre(N);
  for (int i = 0; i < N; ++i) pre[i] = cpu::sigmoid(m[i] * w.scale.data[0] + w.base.data[i]) + c.hc_eps;
  collapse_streams(streams, pre, c.hidden_size, out);
}

}  // namespace frank::engine
