#pragma once
// Shared by the CUDA forward tests (frank_cuda_tests): skipping without a GPU, loading a fixture's
// model, the scaled difference of two logit tensors, bf16-rounded weights, and greedy tokens that
// part at a near-tie.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/kv_record.h"
#include "frank/engine/model.h"
#include "frank/model/loader.h"

namespace frank::test {

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_GPU() \
  if (!::frank::test::have_gpu()) GTEST_SKIP() << "no CUDA device on this machine: the CUDA forward is not checked here"

inline std::unique_ptr<engine::Model> load(const std::filesystem::path& dir) {
  auto m = model::load_model(dir);
  return std::make_unique<engine::Model>(std::move(m.config), std::move(m.weights));
}

// Largest |got - want| / max(1, |want|), and where.
struct Worst {
  double err = 0.0;
  int64_t row = -1, col = -1;
};
inline Worst compare(const Tensor& got, const Tensor& want) {
  Worst w;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double e = std::abs(double{got.data[i]} - want.data[i]) / std::max(1.0, std::abs(double{want.data[i]}));
    if (!(e <= w.err)) w = {e, i / want.cols(), i % want.cols()};
  }
  return w;
}

// f rounded to bf16 (nearest even), as the CUDA model stores bf16 Linear weights.
inline float bf16_round(float f) { return std::bit_cast<float>(uint32_t{engine::float_to_bf16(f)} << 16); }

// Whether the CPU's greedy token `cpu` (from `cpu_row`) and the GPU's `gpu` part. Where they do,
// the CPU logits' top-2 gap must be a near-tie, within the fp32 tolerance 1e-3 * max(1, |top|);
// the parting is reported, and the caller goes no further.
inline bool tokens_part(std::span<const float> cpu_row, int32_t cpu, int32_t gpu, const std::string& where) {
  if (cpu == gpu) return false;
  std::vector<float> sorted(cpu_row.begin(), cpu_row.end());
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
  const double gap = sorted[0] - sorted[1];
  EXPECT_LE(gap, 1e-3 * std::max(1.0f, std::abs(sorted[0])))
      << where << ": greedy tokens part (cpu " << cpu << ", cuda " << gpu << ") with a top-2 gap of " << gap;
  std::cout << fmt::format("{}: near-tie (gap {:.3g}); continuing no further\n", where, gap);
  return true;
}

}  // namespace frank::test
