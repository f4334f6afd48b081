// The CUDA EXL3 kernels (cuda/exl3_gemv.h) against the CPU reference: decoding bit for bit against
// ExLlamaV3's golden tiles and cpu::decode, and the linear bit for bit against cpu::linear_rows
// (the kernels do the same fp32 operations in the same order), on the golden linears and on
// random padded matrices at every bit width and codebook. Skipped without a GPU. Also prints the
// time and bandwidth of one DeepSeek-V4.1 expert-shaped GEMV (gate: 2304 x 5120 at K = 3).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstring>
#include <iostream>
#include <random>
#include <vector>

#include "cuda/cuda_forward_util.h"
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

// GPU linear == CPU linear, bit for bit; returns the number of differing outputs.
size_t linear_mismatches(const Matrix& m, const std::vector<float>& x, int n) {
  OnDevice d(m);
  DeviceBuffer<float> dx(x), du(static_cast<size_t>(n * cpu::exl3_padded(m.cols))),
      dy(static_cast<size_t>(n * m.rows));
  EXPECT_EQ(exl3_linear(d.view, dx.ptr, n, du.ptr, dy.ptr, nullptr), cudaSuccess);
  const std::vector<float> gpu = dy.to_host(static_cast<size_t>(n * m.rows));
  std::vector<float> cpu_y(gpu.size());
  cpu::linear_rows(cpu::CpuKernels::Scalar, x.data(), n, m.host(), cpu_y.data(), 0, m.rows);
  size_t differing = 0;
  double worst = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    differing += std::memcmp(&gpu[i], &cpu_y[i], sizeof(float)) != 0;
    worst = std::max(worst, std::abs(static_cast<double>(gpu[i]) - cpu_y[i]));
  }
  if (differing != 0) std::cout << "  " << differing << " outputs differ, max |gpu - cpu| " << worst << "\n";
  return differing;
}

TEST(CudaExl3, DecodeMatchesGoldenTilesBitForBit) {
  REQUIRE_GPU();
  const auto golden = test::Exl3Golden::open("tiles.safetensors");
  ASSERT_TRUE(golden) << "tests/fixtures/exl3/tiles.safetensors is missing";
  size_t compared = 0, differing = 0;
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
      ASSERT_EQ(exl3_decode(view, q.ptr, nullptr), cudaSuccess);
      const auto all = q.to_host(128 * 128);
      const auto want = golden->u16(name + "." + std::string(cpu::exl3_codebook_name(cb)));
      for (size_t i = 0; i < want.size(); ++i) differing += all[i] != want[i];
      compared += want.size();
    }
  std::cout << "EXL3 decode: " << compared << " golden elements, " << differing << " differ\n";
  EXPECT_EQ(differing, 0u);
}

TEST(CudaExl3, LinearEqualsCpuOnGoldenLinears) {
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

TEST(CudaExl3, LinearEqualsCpuOnRandomPaddedMatrices) {
  REQUIRE_GPU();
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  for (int bits = 1; bits <= 8; ++bits)
    for (Exl3Codebook cb : {Exl3Codebook::ThreeInst, Exl3Codebook::Mcg, Exl3Codebook::Mul1}) {
      const Matrix m = random_matrix(rng, 300, 200, bits, cb);  // padded to [384, 256]
      for (int n : {1, 3, 8}) {
        std::vector<float> x(static_cast<size_t>(n * m.cols));
        for (auto& v : x) v = normal(rng);
        EXPECT_EQ(linear_mismatches(m, x, n), 0u) << "K " << bits << " " << cpu::exl3_codebook_name(cb) << " n " << n;
      }
    }
}

// Time only: prints what one expert-shaped GEMV takes (no assertion on speed).
TEST(CudaExl3, ExpertShapedGemvTiming) {
  REQUIRE_GPU();
  std::mt19937 rng(10);
  const Matrix m = random_matrix(rng, 2304, 5120, 3, Exl3Codebook::Mul1);
  OnDevice d(m);
  for (int n : {1, 8}) {
    DeviceBuffer<float> dx(static_cast<size_t>(n * m.cols)), du(static_cast<size_t>(n * m.cols)),
        dy(static_cast<size_t>(n * m.rows));
    cudaMemset(dx.ptr, 0, static_cast<size_t>(n * m.cols) * sizeof(float));
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    ASSERT_EQ(exl3_linear(d.view, dx.ptr, n, du.ptr, dy.ptr, nullptr), cudaSuccess);  // warm-up
    const int reps = 50;
    cudaEventRecord(start);
    for (int i = 0; i < reps; ++i) exl3_linear(d.view, dx.ptr, n, du.ptr, dy.ptr, nullptr);
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
