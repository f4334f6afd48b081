#pragma once
// Random weight values for synthetic models, by what the weight is (WeightRole): the same values on
// every platform for the same seed (std::normal_distribution differs between standard libraries).
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <vector>

#include "frank/model/weights.h"

namespace frank::model {

// Normal deviates by Box-Muller from the raw 64-bit stream.
class Gaussian {
 public:
  explicit Gaussian(uint64_t seed) : rng_(seed) {}
  float operator()() {
    const double u1 = (static_cast<double>(rng_() >> 11) + 0.5) * 0x1.0p-53;
    const double u2 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
  }
  uint64_t bits() { return rng_(); }

 private:
  std::mt19937_64 rng_;
};

// Linear weights ~ N(0, 1/in), norms near 1, live sinks and biases.
inline float role_sample(WeightRole role, const std::vector<int64_t>& shape, Gaussian& g) {
  const float in = static_cast<float>(shape.back());
  switch (role) {
    case WeightRole::Linear: return g() / std::sqrt(in);
    case WeightRole::Embedding: return g();
    case WeightRole::NormWeight: return 1.0f + 0.1f * g();
    case WeightRole::HcFn: return g() / std::sqrt(in);
    case WeightRole::HcBase: return 0.5f * g();
    case WeightRole::HcScale: return 1.0f + 0.2f * g();
    case WeightRole::Sink: return g();
    case WeightRole::PositionBias: return 0.5f * g();
    case WeightRole::SelectionBias: return 0.1f * g();
  }
  return 0.0f;
}

}  // namespace frank::model
