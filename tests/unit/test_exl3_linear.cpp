// The EXL3 linear (cpu/quant/exl3_gemv.h) against ExLlamaV3 1.6.5's own outputs for four linears
// quantised by quantize_exl3 (tests/fixtures/exl3/linears.safetensors, made on an H200 by
// tools/reference/make_exl3_fixtures.py with int8 GEMV off), at every kernel level this CPU runs.
//
// Tolerance. The fixture's manifest.json records, per linear, how far ExLlamaV3's outputs are from
// a float64 oracle of the same math (fp16 x, bit-exact Q, fp16 suh / svh):
//   |y_ref - y_oracle| <= d_ref * max(1, max |y_oracle|)     (d_ref ~ 4e-4..8e-4: its fp16 roundings
//                                                              of x ∘ suh, the Hadamard outputs and y)
// frank computes the same math in fp32: each output is ~60 roundings deep (suh product, 7
// butterflies and a scale per side, 16 row sums per tile, k/16 tile sums, svh), each a relative
// 2^-24 of partial sums no larger than sqrt(k) max|y|, so |y_ours - y_oracle| stays below
// kOursVsExact = 1e-5 of max(1, max|y|) (checked below against a float64 evaluation). Hence
//   |y_ours - y_ref| <= (d_ref * (1 + d_ref) + kOursVsExact) * max(1, max |y_ref|).
// A wrong sign vector, codebook or orientation moves outputs by O(max|y|), hundreds of times more;
// the last tests show the check fails for them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <cmath>
#include <fstream>
#include <cstring>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "frank/core/dtype.h"
#include "frank/cpu/quant/exl3_gemv.h"
#include "frank/cpu/quant/hadamard.h"
#include "unit/exl3_test_util.h"

namespace frank::cpu {
namespace {

using test::Exl3Golden;

constexpr double kOursVsExact = 1e-5;
const char* const kLinears[] = {"mul1_k2_cal", "mcg_k3_cal", "3inst_k4_cal", "mul1_k5_id"};

std::vector<CpuKernels> supported_levels() {
  std::vector<CpuKernels> levels;
  for (CpuKernels level : {CpuKernels::Scalar, CpuKernels::Avx2, CpuKernels::Avx512})
    if (cpu_supports(level)) levels.push_back(level);
  return levels;
}

std::vector<float> widen(const std::vector<std::uint16_t>& halves) {
  std::vector<float> out(halves.size());
  for (size_t i = 0; i < halves.size(); ++i) out[i] = f16_to_f32(halves[i]);
  return out;
}

// One golden linear: its on-disk tensors, with the codebook told by the marker tensor.
struct GoldenLinear {
  std::string name;
  std::vector<std::int64_t> shape;  // the trellis's
  std::vector<std::uint16_t> trellis, suh, svh;
  Exl3Codebook codebook = Exl3Codebook::ThreeInst;
  nlohmann::json checks;  // manifest.json's entry

  Exl3Matrix view() const {
    const int bits = exl3_bits_from_shape(name + ".trellis", shape);
    return Exl3Matrix{Exl3Trellis{trellis.data(), shape[0], shape[1], bits, codebook}, suh.data(), svh.data(),
                      16 * shape[1], 16 * shape[0]};  // the fixture's shapes need no padding
  }
};

const Exl3Golden& golden() {
  static const std::optional<Exl3Golden> file = Exl3Golden::open("linears.safetensors");
  if (!file) throw std::runtime_error("tests/fixtures/exl3/linears.safetensors is missing");
  return *file;
}

GoldenLinear load(const std::string& name) {
  const Exl3Golden& g = golden();
  GoldenLinear l;
  l.name = name;
  l.shape = g.shape(name + ".trellis");
  l.trellis = g.u16(name + ".trellis");
  l.suh = g.u16(name + ".suh");
  l.svh = g.u16(name + ".svh");
  if (g.has(name + ".mcg")) l.codebook = Exl3Codebook::Mcg;
  if (g.has(name + ".mul1")) l.codebook = Exl3Codebook::Mul1;
  std::ifstream manifest(test::exl3_fixture_dir() / "manifest.json");
  l.checks = nlohmann::json::parse(manifest).at("checks").at("linears").at(name);
  return l;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float f : v) m = std::max(m, std::fabs(static_cast<double>(f)));
  return m;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

std::vector<float> ours(CpuKernels level, const Exl3Matrix& w, const std::vector<float>& x) {
  const std::int64_t n = static_cast<std::int64_t>(x.size()) / w.cols;
  std::vector<float> y(static_cast<size_t>(n * w.rows));
  linear_rows(level, x.data(), n, w, y.data(), 0, w.rows);
  return y;
}

// The same math in float64 from the decoded Q (exl3_trellis, bit-exact against ExLlamaV3), with
// the Hadamard as an explicit +-1 matrix instead of butterflies: y = svh ∘ (H (Q^T (H (suh ∘ x)))).
std::vector<float> float64_oracle(const Exl3Matrix& w, const std::vector<float>& x) {
  const std::int64_t k = w.cols, n = w.rows, tokens = static_cast<std::int64_t>(x.size()) / k;
  const std::vector<float> q = widen(decode(w.trellis));
  const auto hadamard = [](std::vector<double>& v) {
    std::vector<double> out(v.size(), 0.0);
    for (size_t b = 0; b < v.size(); b += 128)
      for (int i = 0; i < 128; ++i)
        for (int j = 0; j < 128; ++j)
          out[b + i] += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * v[b + j] / std::sqrt(128.0);
    v = out;
  };
  std::vector<float> y(static_cast<size_t>(tokens * n));
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::vector<double> u(static_cast<size_t>(k)), z(static_cast<size_t>(n), 0.0);
    for (std::int64_t i = 0; i < k; ++i) u[i] = static_cast<double>(x[t * k + i]) * f16_to_f32(w.suh[i]);
    hadamard(u);
    for (std::int64_t i = 0; i < k; ++i)
      for (std::int64_t c = 0; c < n; ++c) z[c] += u[i] * q[i * n + c];
    hadamard(z);
    for (std::int64_t c = 0; c < n; ++c) y[t * n + c] = static_cast<float>(z[c] * f16_to_f32(w.svh[c]));
  }
  return y;
}

struct Case {
  std::vector<float> x, y_ref;
  double tolerance;
};

Case case_of(const GoldenLinear& l, int rows) {
  const std::string y_name = fmt::format("{}.y{}_kernel", l.name, rows);
  Case c{widen(golden().u16(fmt::format("{}.x{}", l.name, rows))), widen(golden().u16(y_name)), 0};
  const double d_ref = l.checks.at(fmt::format("y{}_kernel_vs_oracle_max_scaled_diff", rows)).get<double>();
  c.tolerance = (d_ref * (1 + d_ref) + kOursVsExact) * std::max(1.0, max_abs(c.y_ref));
  return c;
}

TEST(Exl3Linear, MatchesExllamav3OutputsAtEveryLevel) {
  for (const char* name : kLinears) {
    const GoldenLinear l = load(name);
    const Exl3Matrix w = l.view();
    for (int rows : {1, 5}) {
      const Case c = case_of(l, rows);
      const std::vector<float> exact = float64_oracle(w, c.x);
      for (CpuKernels level : supported_levels()) {
        const std::vector<float> y = ours(level, w, c.x);
        ASSERT_EQ(y.size(), c.y_ref.size());
        const double vs_exact = max_diff(y, exact), vs_ref = max_diff(y, c.y_ref);
        std::cout << fmt::format("{} x{} {}: |ours - float64| {:.2e}, |ours - exllamav3| {:.2e} (tolerance {:.2e})\n",
                                 name, rows, cpu::name(level), vs_exact, vs_ref, c.tolerance);
        EXPECT_LE(vs_exact, kOursVsExact * std::max(1.0, max_abs(exact))) << name << " x" << rows;
        EXPECT_LE(vs_ref, c.tolerance) << name << " x" << rows << " " << cpu::name(level);
      }
    }
  }
}

// The GPU's reconstruct path (fp16 W, then hgemm) is a second reference of the same outputs.
TEST(Exl3Linear, MatchesExllamav3ReconstructPath) {
  for (const char* name : kLinears) {
    const GoldenLinear l = load(name);
    for (int rows : {1, 5}) {
      const std::vector<float> x = widen(golden().u16(fmt::format("{}.x{}", name, rows)));
      const std::vector<float> y_ref = widen(golden().u16(fmt::format("{}.y{}_reconstruct", name, rows)));
      const double d_ref = l.checks.at(fmt::format("y{}_reconstruct_vs_oracle_max_scaled_diff", rows)).get<double>();
      const double tolerance = (d_ref * (1 + d_ref) + kOursVsExact) * std::max(1.0, max_abs(y_ref));
      EXPECT_LE(max_diff(ours(CpuKernels::Scalar, l.view(), x), y_ref), tolerance) << name << " x" << rows;
    }
  }
}

// dequantize() gives W [out, in] = ExLlamaV3's get_weight_tensor() [in, out] transposed, within the
// fixture's recorded deviation of that tensor (fp16 roundings after each Hadamard) plus fp32's.
TEST(Exl3Linear, DequantizeIsTheTransposeOfExllamav3Weight) {
  for (const char* name : kLinears) {
    const GoldenLinear l = load(name);
    const Exl3Matrix w = l.view();
    std::vector<float> ours_w(static_cast<size_t>(w.rows * w.cols));
    dequantize(w, ours_w.data());
    const std::vector<float> weight = widen(golden().u16(std::string(name) + ".weight"));  // [in, out]
    std::vector<float> transposed(weight.size());
    for (std::int64_t i = 0; i < w.cols; ++i)
      for (std::int64_t o = 0; o < w.rows; ++o) transposed[o * w.cols + i] = weight[i * w.rows + o];
    const double d_ref = l.checks.at("weight_vs_oracle_max_scaled_diff").get<double>();
    EXPECT_LE(max_diff(ours_w, transposed), (d_ref * (1 + d_ref) + kOursVsExact) * std::max(1.0, max_abs(weight)))
        << name;
  }
}

// Row ranges (the unit the engine's threads split) give the same values as the whole product,
// including ranges that start and end inside a 128-output Hadamard block.
TEST(Exl3Linear, RowRangesAgreeWithTheWholeProduct) {
  const GoldenLinear l = load("3inst_k4_cal");  // 256 outputs: two Hadamard blocks
  const Exl3Matrix w = l.view();
  const std::vector<float> x = widen(golden().u16("3inst_k4_cal.x5"));
  const std::vector<float> whole = ours(CpuKernels::Scalar, w, x);
  const std::int64_t begin = 100, end = 200, out = end - begin;
  std::vector<float> part(static_cast<size_t>(5 * out));
  linear_rows(CpuKernels::Scalar, x.data(), 5, w, part.data(), begin, end);
  for (std::int64_t t = 0; t < 5; ++t)
    for (std::int64_t r = begin; r < end; ++r) ASSERT_EQ(part[t * out + r - begin], whole[t * w.rows + r]);
}

// The SIMD levels equal the scalar kernel bit for bit (exl3_kernels.h fixes the order of every
// operation) on random trellises (any bit pattern is valid) at every bit width and codebook, for
// 1..9 tokens (9: two kernel calls), with two input and three output blocks.
TEST(Exl3Linear, EveryLevelEqualsScalarBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (int bits = 1; bits <= 8; ++bits)
    for (Exl3Codebook cb : {Exl3Codebook::ThreeInst, Exl3Codebook::Mcg, Exl3Codebook::Mul1}) {
      const std::int64_t k = 256, n = 384;
      std::vector<std::uint16_t> words(static_cast<size_t>(k * n * bits / 16)), suh(k), svh(n);
      for (auto& w : words) w = static_cast<std::uint16_t>(rng());
      for (auto& h : suh) h = f32_to_f16(normal(rng) * 0.1f);
      for (auto& h : svh) h = f32_to_f16(normal(rng));
      const Exl3Matrix w{Exl3Trellis{words.data(), k / 16, n / 16, bits, cb}, suh.data(), svh.data(), n, k};
      for (int tokens : {1, 2, 5, 8, 9}) {
        std::vector<float> x(static_cast<size_t>(tokens * k));
        for (auto& v : x) v = normal(rng);
        const std::vector<float> reference = ours(CpuKernels::Scalar, w, x);
        for (CpuKernels level : supported_levels()) {
          const std::vector<float> y = ours(level, w, x);
          ASSERT_EQ(std::memcmp(y.data(), reference.data(), y.size() * sizeof(float)), 0)
              << cpu::name(level) << " K " << bits << " " << exl3_codebook_name(cb) << " tokens " << tokens;
        }
      }
    }
}

// The check fails when the sandwich is applied wrongly: one input sign flipped, the wrong codebook,
// or the output signs read in reverse order.
TEST(Exl3Linear, WrongSignsOrCodebookFailTheCheck) {
  GoldenLinear l = load("mul1_k2_cal");
  const Case c = case_of(l, 5);
  const auto deviation = [&](const GoldenLinear& g) { return max_diff(ours(CpuKernels::Scalar, g.view(), c.x), c.y_ref); };
  ASSERT_LE(deviation(l), c.tolerance);

  GoldenLinear flipped = l;
  flipped.suh[3] ^= 0x8000;
  EXPECT_GT(deviation(flipped), 10 * c.tolerance);

  GoldenLinear reversed = l;
  std::reverse(reversed.svh.begin(), reversed.svh.end());
  EXPECT_GT(deviation(reversed), 10 * c.tolerance);

  GoldenLinear wrong_codebook = l;
  wrong_codebook.codebook = Exl3Codebook::Mcg;
  EXPECT_GT(deviation(wrong_codebook), 10 * c.tolerance);
}

}  // namespace
}  // namespace frank::cpu
