// Each op of the reference fed transformers' own captured inputs (tiny-v4/ops.safetensors, made
// by tools/reference/make_dsv4_fixtures.py with forward hooks) and checked against transformers'
// captured outputs. One op at a time, so a failure points at the op, not at the whole model.
//
// Tolerance: 1e-5 * max(1, |reference|). One op in fp32 with the same weights differs from torch
// only by summation order and last-bit transcendental differences (~1e-6 relative); a wrong
// formula is off by orders of magnitude more.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <set>

#include "fixture.h"
#include "frank/engine/attention.h"
#include "frank/engine/hyper_connection.h"
#include "frank/engine/indexer.h"
#include "frank/engine/model.h"
#include "frank/engine/moe.h"
#include "frank/model/loader.h"
#include "frank/model/safetensors.h"

namespace frank::test {
namespace {

constexpr double kOpTolerance = 1e-5;

class OpsGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto dir = fixture_root() / "tiny-v4";
    ops_ = new model::SafetensorsFile(model::SafetensorsFile::open(dir / "ops.safetensors"));
    auto loaded = model::load_model(dir);
    model_ = new engine::Model(std::move(loaded.config), std::move(loaded.weights));
  }
  static void TearDownTestSuite() {
    delete ops_;
    delete model_;
  }

  template <typename T>
  static std::vector<T> read(const std::string& name) {
    const auto it = ops_->tensors().find(name);
    if (it == ops_->tensors().end()) throw Error("ops.safetensors lacks " + name);
    const auto bytes = ops_->bytes(it->second);
    std::vector<T> out(bytes.size() / sizeof(T));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
  static Tensor read_tensor(const std::string& name, std::vector<int64_t> shape) {
    return Tensor(std::move(shape), read<float>(name));
  }

  static void expect_close(const float* got, const float* want, size_t n, const std::string& what,
                           double tol = kOpTolerance) {
    double worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      const double scaled = std::abs(static_cast<double>(got[i]) - want[i]) / std::max(1.0, std::abs(double{want[i]}));
      if (!(scaled <= worst)) worst = scaled, at = i;
    }
    EXPECT_LE(worst, tol) << what << ": element " << at << " frank " << got[at] << " vs transformers " << want[at];
  }

  const model::ModelConfig& config() const { return model_->config(); }
  int64_t S() const { return static_cast<int64_t>(read<int64_t>("ids").size()); }

  static model::SafetensorsFile* ops_;
  static engine::Model* model_;
};

model::SafetensorsFile* OpsGolden::ops_ = nullptr;
engine::Model* OpsGolden::model_ = nullptr;

TEST_F(OpsGolden, RopeTablesMatchTransformers) {
  // The YaRN table (low 15 .. high 25, factor 16) and the plain table, each within one fp32 ulp.
  const auto main = read<float>("rope.main_inv_freq");
  const auto compress = read<float>("rope.compress_inv_freq");
  expect_close(model_->main_rope().inv_freq().data(), main.data(), main.size(), "main inv_freq", 2e-7);
  expect_close(model_->compress_rope().inv_freq().data(), compress.data(), compress.size(), "yarn inv_freq", 2e-7);
  // Rotating the pair (1, 0) at position p gives (cos, sin) of angle inv_freq * p.
  const auto cos = read<float>("rope.compress_cos"), sin = read<float>("rope.compress_sin");
  const int pairs = config().rope_dim / 2;
  for (int64_t p = 0; p < S(); ++p)
    for (int i = 0; i < pairs; ++i) {
      std::vector<float> v(config().rope_dim, 0.0f);
      v[2 * i] = 1.0f;
      model_->compress_rope().apply(v.data(), config().rope_dim, p);
      ASSERT_NEAR(v[2 * i], cos[p * pairs + i], 1e-6) << "position " << p << " pair " << i;
      ASSERT_NEAR(v[2 * i + 1], sin[p * pairs + i], 1e-6) << "position " << p << " pair " << i;
    }
}

TEST_F(OpsGolden, HyperConnectionMappingAndSinkhorn) {
  const int N = config().hc_mult, D = config().hidden_size;
  const auto& w = model_->weights().layers[2];
  struct Site {
    const char* name;
    const model::HyperConnectionWeights& hc;
    std::vector<float> in;
  };
  for (const Site& site : {Site{"attn_hc", w.attn_hc, read<float>("layer.1.out")},
                           Site{"ffn_hc", w.ffn_hc, read<float>("layer.2.ffn_hc.in")}}) {
    const auto post = read<float>(fmt::format("layer.2.{}.post", site.name));
    const auto comb = read<float>(fmt::format("layer.2.{}.comb", site.name));
    const auto collapsed = read<float>(fmt::format("layer.2.{}.collapsed", site.name));
    for (int64_t t = 0; t < S(); ++t) {
      const float* streams = site.in.data() + t * N * D;
      const auto mix = engine::hc_mapping(config(), site.hc, streams);
      const auto what = fmt::format("{} token {}", site.name, t);
      expect_close(mix.post.data(), post.data() + t * N, N, what + " post");
      expect_close(mix.comb.data(), comb.data() + t * N * N, N * N, what + " comb (Sinkhorn)", 1e-6);
      std::vector<float> out(D);
      engine::collapse_streams(streams, mix.pre, D, out.data());
      expect_close(out.data(), collapsed.data() + t * D, D, what + " collapsed");
    }
  }
}

TEST_F(OpsGolden, AttentionLayersOfEveryKind) {
  // Layer 0 sliding, 2 CSA, 3 HCA, 4 CSA: the whole sequence through one layer from a fresh state.
  for (int layer : {0, 2, 3, 4}) {
    const Tensor in = read_tensor(fmt::format("layer.{}.self_attn.in", layer), {S(), config().hidden_size});
    const auto want = read<float>(fmt::format("layer.{}.self_attn.out", layer));
    engine::Attention attention(config(), model_->weights().layers[layer].attn, layer, model_->main_rope(),
                                model_->compress_rope());
    engine::Session session = model_->new_session();
    const Tensor out = attention.forward(in, 0, session.layers[layer]);
    expect_close(out.data.data(), want.data(), want.size(), fmt::format("layer {} attention", layer));
  }
}

TEST_F(OpsGolden, CompressedEntriesAndIndexerKeys) {
  // Entry 0 pools window 0 with the empty previous-window slots; every later entry pools a closing
  // window with the previous window's Ca half. Fed token by token, as decode does.
  const int hd = config().head_dim;
  for (int layer : {2, 3, 4}) {
    const Tensor in = read_tensor(fmt::format("layer.{}.self_attn.in", layer), {S(), config().hidden_size});
    engine::Attention attention(config(), model_->weights().layers[layer].attn, layer, model_->main_rope(),
                                model_->compress_rope());
    engine::Session session = model_->new_session();
    auto& state = session.layers[layer];
    for (int64_t t = 0; t < S(); ++t) {
      Tensor one({1, in.cols()}, std::vector<float>(in.row(t), in.row(t) + in.cols()));
      attention.forward(one, t, state);
      ASSERT_EQ(state.compressor.n_entries, (t + 1) / config().compress_ratio[layer]) << "layer " << layer << " t " << t;
    }
    const auto entries = read<float>(fmt::format("cache.layer.{}.compressor.entries", layer));
    ASSERT_EQ(state.compressor.entries.size(), entries.size());
    for (int64_t e = 0; e < state.compressor.n_entries; ++e)
      expect_close(state.compressor.entries.data() + e * hd, entries.data() + e * hd, hd,
                   fmt::format("layer {} compressed entry {}", layer, e));
    if (config().attention[layer] != model::AttentionKind::CompressedSparse) continue;
    const auto keys = read<float>(fmt::format("cache.layer.{}.indexer.keys", layer));
    ASSERT_EQ(state.indexer.entries.size(), keys.size());
    expect_close(state.indexer.entries.data(), keys.data(), keys.size(), fmt::format("layer {} indexer keys", layer));
  }
}

TEST_F(OpsGolden, IndexerSelectionMatchesTorchTopk) {
  // transformers masks entries w >= (t+1)/4 to -inf, takes topk, and turns future picks into -1.
  const auto scores = read<float>("layer.2.indexer.scores");
  const auto topk = read<int64_t>("layer.2.indexer.topk");
  const int64_t entries = static_cast<int64_t>(scores.size()) / S(), k = static_cast<int64_t>(topk.size()) / S();
  for (int64_t t = 0; t < S(); ++t) {
    std::vector<float> row(scores.begin() + t * entries, scores.begin() + (t + 1) * entries);
    for (int64_t w = (t + 1) / config().compress_ratio[2]; w < entries; ++w) row[w] = -INFINITY;
    std::vector<int64_t> want;
    for (int64_t i = 0; i < k; ++i)
      if (topk[t * k + i] >= 0) want.push_back(topk[t * k + i]);
    EXPECT_EQ(engine::top_k_indices(row, config().index_topk), want) << "position " << t;
  }
}

TEST_F(OpsGolden, RoutersHashAndScored) {
  const int D = config().hidden_size, k = config().experts_per_token;
  const auto ids = read<int64_t>("ids");
  for (int layer : {0, 3}) {
    const auto in = read<float>(fmt::format("layer.{}.router.in", layer));
    const auto weights = read<float>(fmt::format("layer.{}.router.weights", layer));
    const auto indices = read<int64_t>(fmt::format("layer.{}.router.indices", layer));
    for (int64_t t = 0; t < S(); ++t) {
      const auto r = engine::route(config(), model_->weights().layers[layer].moe, config().hash_routed[layer],
                                   in.data() + t * D, static_cast<int32_t>(ids[t]));
      // torch's scored top-k is unsorted: compare (expert, weight) as sets.
      std::map<int64_t, float> want, got;
      for (int i = 0; i < k; ++i) want[indices[t * k + i]] = weights[t * k + i];
      for (int i = 0; i < k; ++i) got[r.experts[i]] = r.weights[i];
      ASSERT_EQ(got.size(), want.size());
      for (auto [e, wt] : want) {
        ASSERT_TRUE(got.contains(e)) << "layer " << layer << " token " << t << " misses expert " << e;
        EXPECT_NEAR(got[e], wt, kOpTolerance) << "layer " << layer << " token " << t << " expert " << e;
      }
    }
  }
}

TEST_F(OpsGolden, ExpertsSharedAndRouted) {
  const int D = config().hidden_size, k = config().experts_per_token;
  const auto& moe = model_->weights().layers[4].moe;
  const auto in = read<float>("layer.4.shared_experts.in");
  const auto shared = read<float>("layer.4.shared_experts.out");
  const auto routed = read<float>("layer.4.experts.out");
  const auto idx = read<int64_t>("layer.4.experts.top_k_index");
  const auto wts = read<float>("layer.4.experts.top_k_weights");
  std::vector<float> y(D), sum(D);
  for (int64_t t = 0; t < S(); ++t) {
    engine::swiglu_expert(moe.shared, config().swiglu_limit, in.data() + t * D, y.data());
    expect_close(y.data(), shared.data() + t * D, D, fmt::format("shared expert token {}", t));
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int i = 0; i < k; ++i) {
      engine::swiglu_expert(moe.experts[idx[t * k + i]], config().swiglu_limit, in.data() + t * D, y.data());
      for (int d = 0; d < D; ++d) sum[d] += wts[t * k + i] * y[d];
    }
    expect_close(sum.data(), routed.data() + t * D, D, fmt::format("routed experts token {}", t));
  }
  // The whole block, routing included.
  const Tensor x({S(), int64_t{D}}, in);
  const auto ids = read<int64_t>("ids");
  const Tensor out = engine::moe_forward(config(), moe, false, x, std::vector<int32_t>(ids.begin(), ids.end()));
  const auto want = read<float>("layer.4.mlp.out");
  expect_close(out.data.data(), want.data(), want.size(), "layer 4 MoE block");
}

TEST_F(OpsGolden, HyperHeadAndFinalNorm) {
  const int N = config().hc_mult, D = config().hidden_size;
  const auto in = read<float>("layer.5.out");
  const auto want = read<float>("hc_head.out");
  std::vector<float> out(D);
  for (int64_t t = 0; t < S(); ++t) {
    engine::hyper_head(config(), model_->weights().hc_head, in.data() + t * N * D, out.data());
    expect_close(out.data(), want.data() + t * D, D, fmt::format("hyper-head token {}", t));
  }
}

}  // namespace
}  // namespace frank::test
