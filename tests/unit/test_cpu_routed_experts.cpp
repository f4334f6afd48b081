// The CPU's half of a split MoE step (engine/cpu_routed_experts.h) against the reference MoE
// (engine::moe_forward, itself matched with transformers by the golden tests) on the synthetic tiny
// model: with every expert on the CPU it is the reference's routed sum bit for bit (same products,
// same order, fp32); split in two it adds up to the reference; FP4 experts take the fast kernels
// and agree with the reference's exact-decode path within their fp32 bound.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "frank/core/error.h"
#include "frank/engine/cpu_routed_experts.h"
#include "frank/engine/moe.h"
#include "frank/model/synthetic.h"
#include "frank/model/synthetic_exl3.h"

namespace frank::engine {
namespace {

struct Layer {
  model::ModelConfig config = model::synthetic_config("tiny");
  model::ModelWeights weights = model::random_weights(config, 11);
  int index = 3;  // a scored (not hash-routed) layer
  const model::MoeWeights& moe() const { return weights.layers[static_cast<size_t>(index)].moe; }
};

Tensor random_x(int n, int D, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor x({n, D});
  for (auto& v : x.data) v = normal(rng);
  return x;
}

// The reference's routing of every token of x: experts and weights [n, k].
struct Routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};
Routed route_all(const Layer& l, const Tensor& x, const std::vector<int32_t>& ids) {
  Routed out;
  for (int64_t t = 0; t < x.rows(); ++t) {
    const Routing r = route(l.config, l.moe(), l.config.hash_routed[l.index], x.row(t), ids[t]);
    out.experts.insert(out.experts.end(), r.experts.begin(), r.experts.end());
    out.weights.insert(out.weights.end(), r.weights.begin(), r.weights.end());
  }
  return out;
}

Tensor partial(ThreadPool& pool, const Layer& l, const std::vector<uint8_t>& on_cpu, const Tensor& x,
               const Routed& r) {
  Tensor out({x.rows(), x.cols()});
  cpu_routed_experts(pool, l.config, l.moe(), on_cpu,
                     {x.data.data(), static_cast<int>(x.rows()), r.experts.data(), r.weights.data(),
                      l.config.experts_per_token},
                     out.data.data());
  return out;
}

// Each token's shared-expert output added to `sum` (the reference adds it last).
void add_shared(const Layer& l, const Tensor& x, Tensor& sum) {
  std::vector<float> y(static_cast<size_t>(x.cols()));
  for (int64_t t = 0; t < x.rows(); ++t) {
    swiglu_expert(l.moe().shared, l.config.swiglu_limit, x.row(t), y.data());
    for (int64_t d = 0; d < x.cols(); ++d) sum.row(t)[d] += y[static_cast<size_t>(d)];
  }
}

const std::vector<int32_t> kIds = {5, 17, 3, 99, 42, 7, 8};

TEST(CpuRoutedExperts, EveryExpertOnTheCpuIsTheReferenceBitForBit) {
  const Layer l;
  ThreadPool pool(3);
  const Tensor x = random_x(7, l.config.hidden_size, 1);
  const Tensor want = moe_forward(l.config, l.moe(), false, x, kIds);
  Tensor got = partial(pool, l, std::vector<uint8_t>(8, 1), x, route_all(l, x, kIds));
  add_shared(l, x, got);
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.data[i], want.data[i]) << "value " << i;
}

// EXL3 experts (three bit widths and codebooks, several 128-row blocks per matrix) are split by
// rows over the pool; each (expert, token) must still be swiglu_expert's output bit for bit.
TEST(CpuRoutedExperts, Exl3ExpertsSplitByRowsAreTheReferenceBitForBit) {
  model::ModelConfig c = model::synthetic_config("tiny");
  c.hidden_size = 256;
  c.n_routed_experts = 3;
  const int64_t D = c.hidden_size, I = 384;
  model::MoeWeights moe;
  for (uint64_t e = 0; e < 3; ++e) {
    model::ExpertWeights x;
    x.gate.quantized = model::random_exl3(I, D, 3, Exl3Codebook::ThreeInst, model::exl3_seeds(10 * e + 1));
    x.up.quantized = model::random_exl3(I, D, 2, Exl3Codebook::Mcg, model::exl3_seeds(10 * e + 2));
    x.down.quantized = model::random_exl3(D, I, 4, Exl3Codebook::Mul1, model::exl3_seeds(10 * e + 3));
    moe.experts.push_back(std::move(x));
  }
  const Tensor x = random_x(2, static_cast<int>(D), 7);
  const std::vector<int32_t> experts = {2, 0, 1, 2};
  const std::vector<float> weights = {0.5f, 0.25f, 0.75f, 0.125f};
  ThreadPool pool(3);
  Tensor got({2, D});
  cpu_routed_experts(pool, c, moe, std::vector<uint8_t>(3, 1), {x.data.data(), 2, experts.data(), weights.data(), 2},
                     got.data.data());
  Tensor want({2, D});
  std::vector<float> y(static_cast<size_t>(D));
  for (int t = 0; t < 2; ++t)
    for (const int j : {experts[2 * t] < experts[2 * t + 1] ? 0 : 1, experts[2 * t] < experts[2 * t + 1] ? 1 : 0}) {
      swiglu_expert(moe.experts[static_cast<size_t>(experts[2 * t + j])], c.swiglu_limit, x.row(t), y.data());
      for (int64_t d = 0; d < D; ++d) want.row(t)[d] += y[static_cast<size_t>(d)] * weights[2 * t + j];
    }
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.data[i], want.data[i]) << "value " << i;
}

TEST(CpuRoutedExperts, TheTwoHalvesOfASplitAddUpToTheReference) {
  const Layer l;
  ThreadPool pool(2);
  const Tensor x = random_x(7, l.config.hidden_size, 2);
  const Routed r = route_all(l, x, kIds);
  const std::vector<uint8_t> cpu = {0, 1, 0, 0, 1, 0, 1, 0}, gpu = {1, 0, 1, 1, 0, 1, 0, 1};
  const Tensor a = partial(pool, l, cpu, x, r), b = partial(pool, l, gpu, x, r);
  Tensor sum({x.rows(), x.cols()});
  for (int64_t i = 0; i < sum.numel(); ++i) sum.data[i] = a.data[i] + b.data[i];
  add_shared(l, x, sum);
  const Tensor want = moe_forward(l.config, l.moe(), false, x, kIds);
  // Only the order of k + 1 fp32 additions differs from the reference: a few ulps of the largest term.
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    worst = std::max(worst, std::abs(double{sum.data[i]} - want.data[i]) / std::max(1.0, std::abs(double{want.data[i]})));
  std::cout << "max scaled |cpu half + gpu half - reference| = " << worst << "\n";
  EXPECT_LE(worst, 1e-5);
  // Some token chose a CPU expert and some did not: neither half is all zeros.
  EXPECT_NE(std::count(a.data.begin(), a.data.end(), 0.0f), a.numel());
  EXPECT_NE(std::count(b.data.begin(), b.data.end(), 0.0f), b.numel());
}

TEST(CpuRoutedExperts, RowsOfTokensWithoutCpuExpertsAreZeroAndInvalidIdsAreSkipped) {
  const Layer l;
  ThreadPool pool(1);
  const Tensor x = random_x(2, l.config.hidden_size, 3);
  const Routed r{{1, 2, -1, 9}, {0.5f, 0.25f, 1.0f, 1.0f}};  // token 1: no valid expert
  std::vector<uint8_t> on_cpu(8, 0);
  on_cpu[2] = 1;
  const Tensor got = partial(pool, l, on_cpu, x, r);
  std::vector<float> y(static_cast<size_t>(x.cols()));
  swiglu_expert(l.moe().experts[2], l.config.swiglu_limit, x.row(0), y.data());
  for (int64_t d = 0; d < x.cols(); ++d) {
    EXPECT_EQ(got.row(0)[d], 0.0f + y[static_cast<size_t>(d)] * 0.25f);
    EXPECT_EQ(got.row(1)[d], 0.0f);
  }
  EXPECT_THROW(partial(pool, l, std::vector<uint8_t>(5, 1), x, r), Error);
}

// Random FP4 weights of `rows` x `cols` (scales near 2^0, as in test_expert_runner.cpp).
LinearWeight random_fp4(int64_t rows, int64_t cols, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255), scale(122, 126);
  QuantizedMatrix q;
  q.format = QuantizedMatrix::Format::Fp4;
  q.rows = rows, q.cols = cols;
  q.values.resize(static_cast<size_t>(rows * cols / 2));
  q.scales.resize(static_cast<size_t>(rows * cols / 32));
  for (auto& b : q.values) b = static_cast<uint8_t>(byte(rng));
  for (auto& b : q.scales) b = static_cast<uint8_t>(scale(rng));
  LinearWeight w;
  w.quantized = std::move(q);
  return w;
}

TEST(CpuRoutedExperts, Fp4ExpertsRunOnTheFastKernelsWithinTheirBound) {
  Layer l;
  std::mt19937 rng(4);
  const int64_t D = l.config.hidden_size, I = l.config.moe_intermediate_size;
  auto& experts = l.weights.layers[static_cast<size_t>(l.index)].moe.experts;
  for (auto& e : experts) e = {random_fp4(I, D, rng), random_fp4(I, D, rng), random_fp4(D, I, rng)};
  ThreadPool pool(2);
  const Tensor x = random_x(5, static_cast<int>(D), 5);
  const Routed r = route_all(l, x, kIds);
  const std::vector<uint8_t> on_cpu(8, 1);
  const Tensor got = partial(pool, l, on_cpu, x, r);
  // The reference: swiglu_expert on the same LinearWeights decodes exactly and sums in double.
  Tensor want({x.rows(), D});
  std::vector<float> y(static_cast<size_t>(D));
  for (int64_t t = 0; t < x.rows(); ++t) {
    std::vector<std::pair<int32_t, float>> slots;
    for (int j = 0; j < l.config.experts_per_token; ++j)
      slots.emplace_back(r.experts[static_cast<size_t>(t * 2 + j)], r.weights[static_cast<size_t>(t * 2 + j)]);
    std::stable_sort(slots.begin(), slots.end(), [](auto a, auto b) { return a.first < b.first; });
    for (auto [e, w] : slots) {
      swiglu_expert(experts[static_cast<size_t>(e)], l.config.swiglu_limit, x.row(t), y.data());
      for (int64_t d = 0; d < D; ++d) want.row(t)[d] += y[static_cast<size_t>(d)] * w;
    }
  }
  // The fast kernels' fp32 sums are within cols * 2^-23 of sum |W x| (quant_gemv.h): with 64 and 32
  // columns, 8e-6 of the terms' magnitude per product, carried through SwiGLU and the down rows.
  // 1e-4 * max(1, |want|) is that with room; a wrong scale or nibble is off by a factor of 2 or more.
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    worst = std::max(worst, std::abs(double{got.data[i]} - want.data[i]) / std::max(1.0, std::abs(double{want.data[i]})));
  std::cout << "FP4 experts: max scaled |fast - reference| = " << worst << "\n";
  EXPECT_LE(worst, 1e-4);
  EXPECT_GT(std::abs(want.data[0]) + std::abs(want.data[1]), 0.0);
}

}  // namespace
}  // namespace frank::engine
