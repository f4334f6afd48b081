// The FP8-block / FP4 linear kernels, at every level this CPU supports, against numpy's float64
// goldens and against dequantize() + a float64 dot on random shapes. The bound is the fp32
// dot-product bound of quant_test_util.h, checked per output.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>

#include <fmt/format.h>

#include "frank/core/error.h"
#include "frank/cpu/ops.h"
#include "frank/cpu/quant/quant_gemv.h"
#include "unit/quant_test_util.h"

namespace frank::cpu {
namespace {

using test::fp32_dot_error_bound;
using test::QuantGolden;

std::vector<CpuKernels> supported_levels() {
  std::vector<CpuKernels> levels;
  for (CpuKernels level : {CpuKernels::Scalar, CpuKernels::Avx2, CpuKernels::Avx512})
    if (cpu_supports(level)) levels.push_back(level);
  return levels;
}

// A matrix with its bytes, so a test can build one and then poke at it.
struct Fp8Data {
  std::vector<uint8_t> weight, scales;
  Fp8BlockMatrix view;
};
struct Fp4Data {
  std::vector<uint8_t> packed, scales;
  Fp4Matrix view;
};

Fp8Data golden_fp8(const QuantGolden& golden, const std::string& name) {
  Fp8Data d{golden.get<uint8_t>(name + ".weight"), golden.get<uint8_t>(name + ".scales"), {}};
  const auto& shape = golden.shape(name + ".weight");
  d.view = {d.weight.data(), d.scales.data(), shape[0], shape[1], std::stoi(golden.metadata(name + ".block"))};
  return d;
}

Fp4Data golden_fp4(const QuantGolden& golden, const std::string& name) {
  Fp4Data d{golden.get<uint8_t>(name + ".packed"), golden.get<uint8_t>(name + ".scales"), {}};
  const auto& shape = golden.shape(name + ".packed");
  d.view = {d.packed.data(), d.scales.data(), shape[0], 2 * shape[1]};
  return d;
}

// y [n, rows] from the kernels against exact [n, rows] and abs_sum = sum_j |W_ij x_j|.
void expect_within_bound(const std::vector<float>& y, const std::vector<double>& exact,
                         const std::vector<double>& abs_sum, int64_t cols, const std::string& what) {
  ASSERT_EQ(y.size(), exact.size());
  int failures = 0;
  for (size_t k = 0; k < y.size() && failures < 5; ++k) {
    const double bound = fp32_dot_error_bound(cols, abs_sum[k]);
    if (!(std::abs(y[k] - exact[k]) <= bound)) {
      ++failures;
      ADD_FAILURE() << what << " output " << k << ": " << y[k] << " vs " << exact[k] << " (bound " << bound << ")";
    }
  }
}

template <typename Matrix>
std::vector<float> run(CpuKernels level, const float* x, int64_t n, const Matrix& w) {
  std::vector<float> y(static_cast<size_t>(n * w.rows), NAN);
  linear_rows(level, x, n, w, y.data(), 0, w.rows);
  return y;
}

template <typename Matrix>
void check_golden_case(const QuantGolden& golden, const std::string& name, const Matrix& w) {
  for (CpuKernels level : supported_levels()) {
    const std::string what = name + " " + std::string(cpu::name(level));
    for (int n : {1, 3, 8}) {  // the three golden inputs
      const auto x = golden.get<float>(name + ".x" + std::to_string(n));
      expect_within_bound(run(level, x.data(), n, w), golden.get<double>(name + ".y" + std::to_string(n)),
                          golden.get<double>(name + ".yabs" + std::to_string(n)), w.cols, what + " n " + std::to_string(n));
    }
    // Every token count 1-8 (each has its own kernel): the first n rows of the 8-token input.
    const auto x8 = golden.get<float>(name + ".x8");
    const auto y8 = golden.get<double>(name + ".y8");
    const auto yabs8 = golden.get<double>(name + ".yabs8");
    for (int n = 1; n <= 8; ++n) {
      const auto rows_n = static_cast<size_t>(n * w.rows);
      expect_within_bound(run(level, x8.data(), n, w), {y8.begin(), y8.begin() + rows_n},
                          {yabs8.begin(), yabs8.begin() + rows_n}, w.cols, what + " prefix n " + std::to_string(n));
    }
  }
}

TEST(QuantGemv, EveryLevelMatchesNumpyGolden) {
  const QuantGolden golden;
  for (const std::string name : {"fp8_b128_200x300", "fp8_b32_70x96", "fp8_b32_33x50"})
    check_golden_case(golden, name, golden_fp8(golden, name).view);
  for (const std::string name : {"fp4_64x96", "fp4_40x256"}) check_golden_case(golden, name, golden_fp4(golden, name).view);
}

TEST(QuantGemv, ActiveLevelFollowsEnvironmentAndLinearUsesIt) {
  const char* forced = std::getenv("FRANK_CPU_KERNELS");
  if (forced != nullptr && *forced != '\0') {
    EXPECT_EQ(name(active_cpu_kernels()), forced);
  } else {
    EXPECT_EQ(active_cpu_kernels(), supported_levels().back());  // the best one
  }
  const QuantGolden golden;
  const auto d = golden_fp8(golden, "fp8_b128_200x300");
  const auto x = golden.get<float>("fp8_b128_200x300.x3");
  std::vector<float> y(3 * 200);
  linear(x.data(), 3, d.view, y.data());
  EXPECT_EQ(y, run(active_cpu_kernels(), x.data(), 3, d.view));
  std::cout << "active CPU kernels: " << name(active_cpu_kernels()) << "\n";
}

// Random matrices: scales spread over 2^-9..2^7, weights every non-NaN byte / nibble.
Fp8Data random_fp8(std::mt19937& rng, int64_t rows, int64_t cols, int block) {
  Fp8Data d;
  std::uniform_int_distribution<int> byte(0, 255), scale(118, 134);
  d.weight.resize(static_cast<size_t>(rows * cols));
  for (auto& b : d.weight) do b = static_cast<uint8_t>(byte(rng)); while ((b & 0x7F) == 0x7F);
  d.view = {nullptr, nullptr, rows, cols, block};
  d.scales.resize(static_cast<size_t>(d.view.scale_rows() * d.view.scale_cols()));
  for (auto& s : d.scales) s = static_cast<uint8_t>(scale(rng));
  d.view.weight = d.weight.data();
  d.view.scales = d.scales.data();
  return d;
}

Fp4Data random_fp4(std::mt19937& rng, int64_t rows, int64_t cols) {
  Fp4Data d;
  std::uniform_int_distribution<int> byte(0, 255), scale(118, 134);
  d.packed.resize(static_cast<size_t>(rows * cols / 2));
  for (auto& b : d.packed) b = static_cast<uint8_t>(byte(rng));
  d.scales.resize(static_cast<size_t>(rows * cols / 32));
  for (auto& s : d.scales) s = static_cast<uint8_t>(scale(rng));
  d.view = {d.packed.data(), d.scales.data(), rows, cols};
  return d;
}

std::vector<float> random_x(std::mt19937& rng, int64_t count, float magnitude = 1.0f) {
  std::normal_distribution<float> normal(0.0f, magnitude);
  std::vector<float> x(static_cast<size_t>(count));
  for (auto& v : x) v = normal(rng);
  return x;
}

// The reference: dequantize, then float64 dots.
template <typename Matrix>
void reference(const float* x, int64_t n, const Matrix& w, std::vector<double>& exact, std::vector<double>& abs_sum) {
  std::vector<float> dense(static_cast<size_t>(w.rows * w.cols));
  dequantize(w, dense.data());
  exact.assign(static_cast<size_t>(n * w.rows), 0.0);
  abs_sum.assign(exact.size(), 0.0);
  std::vector<float> abs_w(dense.size()), abs_x(static_cast<size_t>(w.cols));
  for (size_t k = 0; k < dense.size(); ++k) abs_w[k] = std::abs(dense[k]);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < w.cols; ++j) abs_x[j] = std::abs(x[t * w.cols + j]);
    for (int64_t i = 0; i < w.rows; ++i) {
      exact[t * w.rows + i] = dot(dense.data() + i * w.cols, x + t * w.cols, w.cols);
      abs_sum[t * w.rows + i] = dot(abs_w.data() + i * w.cols, abs_x.data(), w.cols);
    }
  }
}

template <typename Matrix>
void check_against_reference(const std::vector<float>& x, int64_t n, const Matrix& w, const std::string& what) {
  std::vector<double> exact, abs_sum;
  reference(x.data(), n, w, exact, abs_sum);
  for (CpuKernels level : supported_levels())
    expect_within_bound(run(level, x.data(), n, w), exact, abs_sum, w.cols, what + " " + std::string(name(level)));
}

TEST(QuantGemv, RandomShapesMatchDequantizedReference) {
  std::mt19937 rng(7);
  // cols around the SIMD widths (16, 32) and blocks; n beyond 8 goes through the token chunking.
  const int64_t fp8_shapes[][2] = {{1, 1}, {3, 15}, {5, 16}, {7, 17}, {33, 31}, {40, 33}, {129, 100}, {9, 128}, {130, 257}, {2, 4096}};
  for (int block : {32, 128})
    for (const auto& [rows, cols] : fp8_shapes)
      for (int64_t n : {1, 2, 5, 8, 11}) {
        const auto d = random_fp8(rng, rows, cols, block);
        check_against_reference(random_x(rng, n * cols), n, d.view,
                                fmt::format("fp8 b{} {}x{} n {}", block, rows, cols, n));
      }
  const int64_t fp4_shapes[][2] = {{1, 32}, {3, 64}, {17, 96}, {64, 512}, {2, 4096}};
  for (const auto& [rows, cols] : fp4_shapes)
    for (int64_t n : {1, 4, 7, 8, 9, 17}) {
      const auto d = random_fp4(rng, rows, cols);
      check_against_reference(random_x(rng, n * cols), n, d.view, fmt::format("fp4 {}x{} n {}", rows, cols, n));
    }
}

// Scales at both ends of ue8m0 (2^-127 makes subnormal fp32 weights) with weights of magnitude
// <= 1.5 (so W < 2^128 stays finite) and x scaled to keep the products normal: every decode and
// scale step must stay exact there too.
TEST(QuantGemv, ExtremeScalesAreExact) {
  std::mt19937 rng(11);
  for (int s : {0, 1, 100, 127, 200, 253, 254}) {
    const float x_magnitude = std::ldexp(1.0f, std::clamp(127 - s, -100, 100));
    auto fp8 = random_fp8(rng, 40, 96, 32);
    for (auto& b : fp8.weight) b = static_cast<uint8_t>((b & 0x80) | std::min(b & 0x7F, 0x38));  // |e4m3| <= 1
    for (auto& v : fp8.scales) v = static_cast<uint8_t>(s);
    check_against_reference(random_x(rng, 3 * 96, x_magnitude), 3, fp8.view, fmt::format("fp8 scale byte {}", s));
    auto fp4 = random_fp4(rng, 40, 96);
    for (auto& b : fp4.packed) b &= 0xBB;  // each nibble: sign and magnitude index <= 3 (|e2m1| <= 1.5)
    for (auto& v : fp4.scales) v = static_cast<uint8_t>(s);
    check_against_reference(random_x(rng, 3 * 96, x_magnitude), 3, fp4.view, fmt::format("fp4 scale byte {}", s));
  }
}

TEST(QuantGemv, NaNWeightsAndScalesPoisonOnlyTheirRows) {
  std::mt19937 rng(3);
  auto fp8 = random_fp8(rng, 70, 300, 32);
  fp8.weight[5 * 300 + 299] = 0x7F;  // row 5, in the tail of the row
  fp8.weight[9 * 300 + 17] = 0xFF;   // row 9, -NaN
  fp8.scales[2 * fp8.view.scale_cols() + 1] = 0xFF;  // rows 64..69
  auto fp4 = random_fp4(rng, 8, 64);
  fp4.scales[3 * 2 + 1] = 0xFF;  // row 3
  const auto x = random_x(rng, 2 * 300);
  for (CpuKernels level : supported_levels()) {
    const auto y8 = run(level, x.data(), 2, fp8.view);
    for (int t = 0; t < 2; ++t)
      for (int64_t i = 0; i < 70; ++i)
        EXPECT_EQ(std::isnan(y8[t * 70 + i]), i == 5 || i == 9 || i >= 64) << name(level) << " fp8 row " << i;
    const auto y4 = run(level, x.data(), 2, fp4.view);
    for (int t = 0; t < 2; ++t)
      for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(std::isnan(y4[t * 8 + i]), i == 3) << name(level) << " fp4 row " << i;
  }
}

TEST(QuantGemv, RowRangesWriteOnlyTheirRowsAndComposeExactly) {
  std::mt19937 rng(5);
  const auto fp8 = random_fp8(rng, 300, 200, 128);
  const auto x = random_x(rng, 3 * 200);
  for (CpuKernels level : supported_levels()) {
    const auto whole = run(level, x.data(), 3, fp8.view);
    std::vector<float> pieces(whole.size(), -1.0f);
    linear_rows(level, x.data(), 3, fp8.view, pieces.data(), 130, 131);
    for (int64_t i = 0; i < 300; ++i) EXPECT_EQ(pieces[i], i == 130 ? whole[i] : -1.0f) << i;
    linear_rows(level, x.data(), 3, fp8.view, pieces.data(), 0, 130);
    linear_rows(level, x.data(), 3, fp8.view, pieces.data(), 131, 300);
    linear_rows(level, x.data(), 3, fp8.view, pieces.data(), 300, 300);  // empty range
    EXPECT_EQ(pieces, whole) << name(level);
  }
}

TEST(QuantGemv, BadCallsAreRejected) {
  const uint8_t bytes[64] = {};
  float x[64] = {}, y[64] = {};
  using ::testing::HasSubstr;
  using ::testing::ThrowsMessage;
  EXPECT_THAT([&] { linear(x, 1, Fp8BlockMatrix{bytes, bytes, 2, 2, 16}, y); }, ThrowsMessage<Error>(HasSubstr("block size 16")));
  EXPECT_THAT([&] { linear(x, 1, Fp4Matrix{bytes, bytes, 1, 40}, y); }, ThrowsMessage<Error>(HasSubstr("not a multiple of 32")));
  EXPECT_THAT([&] { linear(x, -1, Fp4Matrix{bytes, bytes, 1, 32}, y); }, ThrowsMessage<Error>(HasSubstr("negative token count")));
  EXPECT_THAT([&] { linear_rows(CpuKernels::Scalar, x, 1, Fp4Matrix{bytes, bytes, 2, 32}, y, 1, 3); },
              ThrowsMessage<Error>(HasSubstr("row range [1, 3) outside [0, 2)")));
  EXPECT_NO_THROW(linear(x, 0, Fp4Matrix{bytes, bytes, 2, 32}, y));  // no tokens: nothing to do
  for (CpuKernels level : {CpuKernels::Avx2, CpuKernels::Avx512})
    if (!cpu_supports(level)) {
      EXPECT_THAT([&] { linear_rows(level, x, 1, Fp4Matrix{bytes, bytes, 1, 32}, y, 0, 1); },
                  ThrowsMessage<Error>(HasSubstr("not supported by this CPU")));
    }
}

}  // namespace
}  // namespace frank::cpu
