#pragma once
// Tensor: a dense, row-major fp32 array with a shape. The reference engine keeps every weight and
// activation in this one type; quantised formats arrive later as separate types with their own ops.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace frank {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;

  Tensor() = default;
  explicit Tensor(std::vector<int64_t> s) : shape(std::move(s)), data(static_cast<size_t>(count(shape)), 0.0f) {}
  Tensor(std::vector<int64_t> s, std::vector<float> d) : shape(std::move(s)), data(std::move(d)) {}

  static int64_t count(const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (auto d : s) n *= d;
    return n;
  }
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  bool empty() const { return data.empty(); }
  int64_t rows() const { return shape.empty() ? 0 : shape.front(); }
  // From the shape, so a shape-only tensor (a GPU backend's synthetic weight: data generated on the
  // device, none on the host) still tells its width.
  int64_t cols() const { return rows() == 0 ? 0 : count(shape) / rows(); }
  float* row(int64_t i) { return data.data() + i * cols(); }
  const float* row(int64_t i) const { return data.data() + i * cols(); }
  std::span<const float> span() const { return data; }
};

std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace frank
