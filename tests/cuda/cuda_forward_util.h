#pragma once
// Shared by the CUDA forward tests (frank_cuda_tests): skipping without a GPU, loading a fixture's
// model, and the scaled difference of two logit tensors.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include "frank/core/tensor.h"
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

}  // namespace frank::test
