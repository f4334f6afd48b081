#include "frank/cpu/ops.h"

#include "frank/cpu/quantized_linear.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace frank::cpu {

double dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

void linear(const float* x, int64_t n, const Tensor& w, float* y) {
  const int64_t out = w.rows(), in = w.cols();
  for (int64_t t = 0; t < n; ++t)
    for (int64_t o = 0; o < out; ++o) y[t * out + o] = static_cast<float>(dot(w.row(o), x + t * in, in));
}

Tensor linear(const Tensor& x, const Tensor& w) {
  Tensor y({x.rows(), w.rows()});
  linear(x.data.data(), x.rows(), w, y.data.data());
  return y;
}

void linear_rows(const float* x, int64_t n, const LinearWeight& w, int64_t row_begin, int64_t row_end, float* y) {
  if (w.quantized) {
    quantized_linear_rows(x, n, *w.quantized, row_begin, row_end, y);
    return;
  }
  const int64_t in = w.dense.cols(), out = row_end - row_begin;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t o = 0; o < out; ++o)
      y[t * out + o] = static_cast<float>(dot(w.dense.row(row_begin + o), x + t * in, in));
}

void linear(const float* x, int64_t n, const LinearWeight& w, float* y) { linear_rows(x, n, w, 0, w.rows(), y); }

Tensor linear(const Tensor& x, const LinearWeight& w) {
  Tensor y({x.rows(), w.rows()});
  linear(x.data.data(), x.rows(), w, y.data.data());
  return y;
}

void rms_norm(float* x, int64_t n, const float* weight, float eps) {
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sq / static_cast<double>(n));
  const float inv = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) {
    x[i] *= inv;
    if (weight != nullptr) x[i] *= weight[i];
  }
}

void softmax(float* x, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] / sum);
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float silu(float x) { return x * sigmoid(x); }

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace frank::cpu
