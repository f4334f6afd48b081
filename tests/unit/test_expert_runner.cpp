// The CPU expert runtime (cpu/quant/expert_runner.h): any thread count (pinned or not) and any
// task size give bit-for-bit the single-threaded result, which is the clamped SwiGLU of the
// dequantised weights within the kernels' stated fp32 bound (checked against a double reference).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "frank/core/error.h"
#include "frank/core/thread_pool.h"
#include "frank/cpu/ops.h"
#include "frank/cpu/quant/expert_runner.h"

namespace frank::cpu {
namespace {

struct OwnedFp4 {
  std::vector<uint8_t> packed, scales;
  Fp4Matrix view;
  OwnedFp4(int64_t rows, int64_t cols, std::mt19937& rng) {
    std::uniform_int_distribution<int> byte(0, 255), scale(120, 128);
    packed.resize(static_cast<size_t>(rows * cols / 2));
    scales.resize(static_cast<size_t>(rows * cols / 32));
    for (auto& b : packed) b = static_cast<uint8_t>(byte(rng));
    for (auto& b : scales) b = static_cast<uint8_t>(scale(rng));
    view = {packed.data(), scales.data(), rows, cols};
  }
};

struct OwnedExpert {
  OwnedFp4 gate, up, down;
  Fp4Expert view;
  OwnedExpert(int64_t hidden, int64_t inter, std::mt19937& rng)
      : gate(inter, hidden, rng), up(inter, hidden, rng), down(hidden, inter, rng) {
    view = {gate.view, up.view, down.view};
  }
};

TEST(ExpertRunner, ThreadCountDoesNotChangeTheResultAndItMatchesTheReference) {
  std::mt19937 rng(5);
  const int64_t hidden = 256, inter = 96;
  const float limit = 10.0f;
  std::vector<OwnedExpert> experts;
  for (int e = 0; e < 3; ++e) experts.emplace_back(hidden, inter, rng);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  const std::vector<int64_t> tokens = {1, 3, 8};
  std::vector<std::vector<float>> x(3);
  for (size_t e = 0; e < 3; ++e) {
    x[e].resize(static_cast<size_t>(tokens[e] * hidden));
    for (auto& v : x[e]) v = normal(rng);
  }
  auto run = [&](unsigned threads, bool pin, int64_t rows_per_task) {
    ThreadPool pool(threads, pin);
    std::vector<std::vector<float>> out(3);
    std::vector<ExpertCall> calls;
    for (size_t e = 0; e < 3; ++e) {
      out[e].assign(static_cast<size_t>(tokens[e] * hidden), 0.0f);
      calls.push_back({&experts[e].view, x[e].data(), tokens[e], out[e].data()});
    }
    run_experts(pool, calls, limit, active_cpu_kernels(), rows_per_task);
    return out;
  };
  const auto one = run(1, false, 128);
  for (const auto& [threads, pin, rows] : std::vector<std::tuple<unsigned, bool, int64_t>>{
           {2, false, 128}, {4, true, 7}, {3, false, 1}, {8, false, 1000}})
    ASSERT_EQ(run(threads, pin, rows), one) << threads << " threads, " << rows << " rows per task";

  // Reference: dequantised weights, double arithmetic.
  for (size_t e = 0; e < 3; ++e) {
    std::vector<float> g(static_cast<size_t>(inter * hidden)), u(g.size()), d(static_cast<size_t>(hidden * inter));
    dequantize(experts[e].gate.view, g.data());
    dequantize(experts[e].up.view, u.data());
    dequantize(experts[e].down.view, d.data());
    for (int64_t t = 0; t < tokens[e]; ++t) {
      const float* xt = x[e].data() + t * hidden;
      std::vector<double> h(static_cast<size_t>(inter));
      std::vector<double> h_abs(h.size());
      for (int64_t i = 0; i < inter; ++i) {
        double gs = 0, us = 0;
        for (int64_t j = 0; j < hidden; ++j) {
          gs += double{g[static_cast<size_t>(i * hidden + j)]} * xt[j];
          us += double{u[static_cast<size_t>(i * hidden + j)]} * xt[j];
        }
        const double gc = std::min(gs, double{limit});
        h[static_cast<size_t>(i)] = gc / (1 + std::exp(-gc)) * std::clamp(us, -double{limit}, double{limit});
      }
      for (int64_t o = 0; o < hidden; ++o) {
        double want = 0, scale = 0;
        for (int64_t i = 0; i < inter; ++i) {
          want += double{d[static_cast<size_t>(o * inter + i)]} * h[static_cast<size_t>(i)];
          scale += std::abs(double{d[static_cast<size_t>(o * inter + i)]} * h[static_cast<size_t>(i)]);
        }
        // fp32 error through three products (gate/up then down) stays far below this bound:
        // a few units of gamma(n) times the magnitudes involved, plus the gate/up error carried.
        const double tolerance = 1e-4 * (scale + 1e-3);
        ASSERT_NEAR(one[e][static_cast<size_t>(t * hidden + o)], want, tolerance) << "expert " << e << " token " << t;
      }
    }
  }
}

TEST(ExpertRunner, MisshapenExpertsAndBadTaskSizesAreRefused) {
  std::mt19937 rng(1);
  OwnedExpert e(64, 32, rng);
  Fp4Expert bad = e.view;
  bad.down = e.gate.view;  // [32, 64] where [64, 32] belongs
  std::vector<float> x(64), out(64);
  ThreadPool pool(2);
  const std::vector<ExpertCall> calls = {{&bad, x.data(), 1, out.data()}};
  EXPECT_THROW(run_experts(pool, calls, 10.0f, CpuKernels::Scalar), Error);
  const std::vector<ExpertCall> good = {{&e.view, x.data(), 1, out.data()}};
  EXPECT_THROW(run_experts(pool, good, 10.0f, CpuKernels::Scalar, 0), Error);
}

TEST(ThreadPoolTest, RunsEveryTaskOnceAndRethrows) {
  ThreadPool pool(4);
  std::vector<int> hits(1000, 0);
  pool.parallel_for(1000, [&](int64_t i) { ++hits[static_cast<size_t>(i)]; });
  for (int h : hits) ASSERT_EQ(h, 1);
  EXPECT_THROW(pool.parallel_for(10, [](int64_t i) {
    if (i == 3) throw Error("task 3");
  }),
               Error);
  pool.parallel_for(5, [&](int64_t i) { hits[static_cast<size_t>(i)] = 7; });  // still usable
  EXPECT_EQ(hits[4], 7);
}

}  // namespace
}  // namespace frank::cpu
