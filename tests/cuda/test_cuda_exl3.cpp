// The CUDA EXL3 kernels (cuda/exl3_gemv.h) against the CPU reference: both decoders (exl3_decode
// and exl3_linear's, exl3_decode_lanes) bit for bit against ExLlamaV3's golden tiles, and the
// linear's against cpu::decode on every state; the linear within a derived rounding bound of
// cpu::linear_rows (it sums in another order) and the same bits on every run, on the golden
// linears, on random padded matrices at every bit width and codebook, and at DeepSeek-V4.1's
// expert shapes. Skipped without a GPU, except the check that the bound catches one wrong tile.
// Also prints the time and bandwidth of one V4.1 expert-shaped GEMV (gate: 2304 x 5120 at K = 3);
// frank_linear_bench has the full table.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_forward_util.h"
#include "cuda/exl3_bound.h"
#include "frank/core/dtype.h"
#include "frank/cpu/quant/exl3_gemv.h"
#include "frank/cuda/exl3_gemv.h"
#include "unit/exl3_test_util.h"

namespace frank::cuda {
namespace {

template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  explicit DeviceBuffer(size_t n) { EXPECT_EQ(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess); }
  DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  std::vector<T> to_host(size_t n) const {
    std::vector<T> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
};

// A host matrix and its device copy.
struct Matrix {
  std::vector<uint16_t> trellis, suh, svh;
  int64_t rows, cols;
  int bits;
  Exl3Codebook codebook;

  cpu::Exl3Matrix host() const {
    return {cpu::Exl3Trellis{trellis.data(), cpu::exl3_padded(cols) / 16, cpu::exl3_padded(rows) / 16, bits, codebook},
            suh.data(), svh.data(), rows, cols};
  }
};

Matrix random_matrix(std::mt19937& rng, int64_t rows, int64_t cols, int bits, Exl3Codebook codebook) {
  const int64_t pr = cpu::exl3_padded(rows), pc = cpu::exl3_padded(cols);
  Matrix m{std::vector<uint16_t>(static_cast<size_t>(pr * pc * bits / 16)), std::vector<uint16_t>(pc),
           std::vector<uint16_t>(pr), rows, cols, bits, codebook};
  std::normal_distribution<float> normal;
  for (auto& w : m.trellis) w = static_cast<uint16_t>(rng());
  for (auto& h : m.suh) h = f32_to_f16(normal(rng) * 0.05f);
  for (auto& h : m.svh) h = f32_to_f16(normal(rng));
  return m;
}

struct OnDevice {
  DeviceBuffer<uint16_t> trellis, suh, svh;
  Exl3DeviceMatrix view;
  explicit OnDevice(const Matrix& m)
      : trellis(m.trellis), suh(m.suh), svh(m.svh),
        view{trellis.ptr, suh.ptr, svh.ptr, m.rows, m.cols, m.bits, m.codebook} {}
};

using Decoder = cudaError_t (*)(const Exl3DeviceMatrix&, uint16_t*, cudaStream_t);

// A bound on |y_gpu - y_cpu| for each output [t, r], from the data (exl3_bound.h: the sums of Q^T u in
// different orders, the same input transform).
std::vector<double> rounding_bound(const Matrix& m, const std::vector<float>& x, int n) {
  return frank_test::exl3_gemv_bound(m.host(), x.data(), nullptr, n);
}

// Outputs of `y` farther than the bound from `want`; prints the worst |y - want| / bound.
size_t outside_bound(const std::vector<float>& y, const std::vector<float>& want, const std::vector<double>& bound) {
  size_t outside = 0;
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double error = std::abs(static_cast<double>(y[i]) - want[i]);
    outside += !(error <= bound[i]);  // NaN counts as outside
    worst = std::max(worst, error / bound[i]);
  }
  std::cout << "  worst |y - cpu| / bound " << worst << (outside ? ", " + std::to_string(outside) + " outside" : "")
            << "\n";
  return outside;
}

std::vector<float> cpu_linear(const Matrix& m, const std::vector<float>& x, int n) {
  std::vector<float> y(static_cast<size_t>(n * m.rows));
  cpu::linear_rows(cpu::CpuKernels::Scalar, x.data(), n, m.host(), y.data(), 0, m.rows);
  return y;
}

// The GPU linear within rounding_bound of the CPU's, and the same bits on a second run; returns the
// number of outputs that fail either.
size_t linear_mismatches(const Matrix& m, const std::vector<float>& x, int n) {
  OnDevice d(m);
  DeviceBuffer<float> dx(x), scratch(static_cast<size_t>(exl3_linear_scratch_floats(d.view, n))),
      dy(static_cast<size_t>(n * m.rows));
  const auto run = [&] {
    EXPECT_EQ(exl3_linear(d.view, dx.ptr, n, scratch.ptr, dy.ptr, nullptr), cudaSuccess);
    return dy.to_host(static_cast<size_t>(n * m.rows));
  };
  const std::vector<float> gpu = run(), again = run();
  size_t unrepeated = 0;
  for (size_t i = 0; i < gpu.size(); ++i) unrepeated += std::memcmp(&gpu[i], &again[i], sizeof(float)) != 0;
  if (unrepeated != 0) std::cout << "  " << unrepeated << " outputs changed between two runs\n";
  return unrepeated + outside_bound(gpu, cpu_linear(m, x, n), rounding_bound(m, x, n));
}

std::vector<float> normal_input(std::mt19937& rng, const Matrix& m, int n) {
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(n * m.cols));
  for (auto& v : x) v = normal(rng);
  return x;
}

// The bound has teeth: one tile with every stream bit inverted (every weight of one 16x16 tile
// wrong, as a misread tile or a wrong lane's states would make) puts outputs outside it. (A single
// wrong weight can stay inside: its error, about s |u_i|, is below the worst case of k roundings
// at these sizes.) Host only: the CPU linear of the changed matrix against that of the original.
TEST(CudaExl3, RoundingBoundCatchesOneWrongTile) {
  std::mt19937 rng(11);
  for (int bits : {2, 3, 4}) {
    const Matrix m = random_matrix(rng, 256, 512, bits, Exl3Codebook::ThreeInst);
    Matrix wrong = m;
    const size_t tile_words = static_cast<size_t>(16 * bits), tile = wrong.trellis.size() / tile_words / 3;
    for (size_t j = tile * tile_words; j < (tile + 1) * tile_words; ++j) wrong.trellis[j] ^= 0xFFFFu;
    const std::vector<float> x = normal_input(rng, m, 2);
    EXPECT_GT(outside_bound(cpu_linear(wrong, x, 2), cpu_linear(m, x, 2), rounding_bound(m, x, 2)), 0u)
        << "K " << bits;
  }
}

TEST(CudaExl3, DecodeMatchesGoldenTilesBitForBit) {
  REQUIRE_GPU();
  const auto golden = test::Exl3Golden::open("tiles.safetensors");
  ASSERT_TRUE(golden) << "tests/fixtures/exl3/tiles.safetensors is missing";
  size_t compared = 0, differing = 0;
  for (Decoder decode : {exl3_decode, exl3_decode_lanes})
    for (int bits = 1; bits <= 8; ++bits)
      for (Exl3Codebook cb : {Exl3Codebook::ThreeInst, Exl3Codebook::Mcg, Exl3Codebook::Mul1}) {
        const std::string name = std::string("K").append(std::to_string(bits));
        const auto& shape = golden->shape(name + ".trellis");  // [2, 8, 16K]: Q [32, 128]
        // The fixture's Q has 32 inputs; the kernel decodes whole 128-blocks, so the trellis gets
        // zero tiles up to 128 inputs and the first 32 rows of Q [128, 128] are compared.
        std::vector<uint16_t> words = golden->u16(name + ".trellis");
        words.resize(static_cast<size_t>(8 * shape[1] * 16 * bits), 0);
        DeviceBuffer<uint16_t> trellis(words), q(static_cast<size_t>(128 * 128));
        const Exl3DeviceMatrix view{trellis.ptr, trellis.ptr, trellis.ptr, shape[1] * 16, 128, bits, cb};
        ASSERT_EQ(decode(view, q.ptr, nullptr), cudaSuccess);
        const auto all = q.to_host(128 * 128);
        const auto want = golden->u16(name + "." + std::string(cpu::exl3_codebook_name(cb)));
        for (size_t i = 0; i < want.size(); ++i) differing += all[i] != want[i];
        compared += want.size();
      }
  std::cout << "EXL3 decode (both decoders): " << compared << " golden elements, " << differing << " differ\n";
  EXPECT_EQ(differing, 0u);
}

// exl3_linear's decoder (exl3_decode_lanes) equals cpu::decode bit for bit at every K and codebook,
// on random trellises of 2^20 elements: each 16-bit state about 16 times, so all of them with
// near certainty.
TEST(CudaExl3, LinearDecoderEqualsCpuDecodeOnEveryState) {
  REQUIRE_GPU();
  std::mt19937 rng(13);
  for (int bits = 1; bits <= 8; ++bits)
    for (Exl3Codebook cb : {Exl3Codebook::ThreeInst, Exl3Codebook::Mcg, Exl3Codebook::Mul1}) {
      const Matrix m = random_matrix(rng, 1024, 1024, bits, cb);
      OnDevice d(m);
      DeviceBuffer<uint16_t> q(size_t{1} << 20);
      ASSERT_EQ(exl3_decode_lanes(d.view, q.ptr, nullptr), cudaSuccess);
      const std::vector<uint16_t> gpu = q.to_host(size_t{1} << 20), want = cpu::decode(m.host().trellis);
      size_t differing = 0;
      for (size_t i = 0; i < want.size(); ++i) differing += gpu[i] != want[i];
      EXPECT_EQ(differing, 0u) << "K " << bits << " " << cpu::exl3_codebook_name(cb);
    }
}

TEST(CudaExl3, LinearMatchesCpuOnGoldenLinears) {
  REQUIRE_GPU();
  const auto golden = test::Exl3Golden::open("linears.safetensors");
  ASSERT_TRUE(golden);
  for (const char* name : {"mul1_k2_cal", "mcg_k3_cal", "3inst_k4_cal", "mul1_k5_id"}) {
    const std::string s(name);
    const auto& shape = golden->shape(s + ".trellis");
    Matrix m{golden->u16(s + ".trellis"), golden->u16(s + ".suh"), golden->u16(s + ".svh"), shape[1] * 16,
             shape[0] * 16, static_cast<int>(shape[2] / 16),
             golden->has(s + ".mcg") ? Exl3Codebook::Mcg
                                     : (golden->has(s + ".mul1") ? Exl3Codebook::Mul1 : Exl3Codebook::ThreeInst)};
    for (int rows : {1, 5}) {
      std::vector<float> x;
      for (uint16_t h : golden->u16(s + ".x" + std::to_string(rows))) x.push_back(f16_to_f32(h));
      EXPECT_EQ(linear_mismatches(m, x, rows), 0u) << name << " x" << rows;
    }
  }
}

TEST(CudaExl3, LinearMatchesCpuOnRandomPaddedMatrices) {
  REQUIRE_GPU();
  std::mt19937 rng(9);
  for (int bits = 1; bits <= 8; ++bits)
    for (Exl3Codebook cb : {Exl3Codebook::ThreeInst, Exl3Codebook::Mcg, Exl3Codebook::Mul1}) {
      const Matrix m = random_matrix(rng, 300, 200, bits, cb);  // padded to [384, 256]
      for (int n : {1, 2, 3, 8})
        EXPECT_EQ(linear_mismatches(m, normal_input(rng, m, n), n), 0u)
            << "K " << bits << " " << cpu::exl3_codebook_name(cb) << " n " << n;
    }
}

// DeepSeek-V4.1's expert shapes (gate/up [2304, 5120], down [5120, 2304]): k split into slices of
// several 128-blocks, as the real GEMVs are.
TEST(CudaExl3, LinearMatchesCpuAtExpertShapes) {
  REQUIRE_GPU();
  std::mt19937 rng(12);
  const int64_t shapes[][2] = {{2304, 5120}, {5120, 2304}};
  for (const auto& shape : shapes)
    for (int bits : {2, 3, 4}) {
      const Matrix m = random_matrix(rng, shape[0], shape[1], bits, Exl3Codebook::Mul1);
      for (int n : {1, 5})
        EXPECT_EQ(linear_mismatches(m, normal_input(rng, m, n), n), 0u)
            << shape[0] << "x" << shape[1] << " K " << bits << " n " << n;
    }
}

// Time only: prints what one expert-shaped GEMV takes (no assertion on speed).
TEST(CudaExl3, ExpertShapedGemvTiming) {
  REQUIRE_GPU();
  std::mt19937 rng(10);
  const Matrix m = random_matrix(rng, 2304, 5120, 3, Exl3Codebook::Mul1);
  OnDevice d(m);
  for (int n : {1, 8}) {
    DeviceBuffer<float> dx(static_cast<size_t>(n * m.cols)),
        scratch(static_cast<size_t>(exl3_linear_scratch_floats(d.view, n))), dy(static_cast<size_t>(n * m.rows));
    cudaMemset(dx.ptr, 0, static_cast<size_t>(n * m.cols) * sizeof(float));
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    ASSERT_EQ(exl3_linear(d.view, dx.ptr, n, scratch.ptr, dy.ptr, nullptr), cudaSuccess);  // warm-up
    const int reps = 50;
    cudaEventRecord(start);
    for (int i = 0; i < reps; ++i) exl3_linear(d.view, dx.ptr, n, scratch.ptr, dy.ptr, nullptr);
    cudaEventRecord(stop);
    ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    const double us = 1000.0 * ms / reps, bytes = 2.0 * static_cast<double>(m.trellis.size());
    std::cout << "EXL3 GEMV 2304x5120 K=3 mul1, " << n << " token(s): " << us << " us, " << bytes / us / 1e3
              << " GB/s of trellis\n";
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
}

}  // namespace
}  // namespace frank::cuda
