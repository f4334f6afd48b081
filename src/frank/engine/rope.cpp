#include "frank/engine/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace frank::engine {
namespace {

// YaRN's correction dimension for a number of rotations (in double, as transformers does in Python).
double correction_dim(double rotations, int dim, double base, double max_positions) {
  return (dim * std::log(max_positions / (rotations * 2.0 * std::numbers::pi))) / (2.0 * std::log(base));
}

}  // namespace

RopeTable::RopeTable(const model::RopeSpec& spec, int rope_dim) {
  const int pairs = rope_dim / 2;
  inv_freq_.resize(pairs);
  const float base = static_cast<float>(spec.theta);
  for (int i = 0; i < pairs; ++i) {
    // theta^(2i/d) in fp32, then its reciprocal in fp32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rope_dim);
    const float pos_freq = std::pow(base, exponent);
    const float extrapolation = 1.0f / pos_freq;
    if (!spec.yarn) {
      inv_freq_[i] = extrapolation;
      continue;
    }
    const float interpolation = 1.0f / (static_cast<float>(spec.factor) * pos_freq);
    const double max_pos = static_cast<double>(spec.original_max_position_embeddings);
    double low = std::floor(correction_dim(spec.beta_fast, rope_dim, spec.theta, max_pos));
    double high = std::ceil(correction_dim(spec.beta_slow, rope_dim, spec.theta, max_pos));
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(rope_dim - 1));
    if (low == high) high += 0.001;  // transformers avoids a zero-width ramp the same way
    const float ramp = std::clamp((static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low),
                                  0.0f, 1.0f);
    // transformers mixes with (1 - ramp) as the extrapolation weight; 1 - (1 - ramp) is kept as
    // written because it is not bit-equal to ramp in fp32 (dsv4-reference-notes A5).
    const float extrapolation_weight = 1.0f - ramp;
    inv_freq_[i] = interpolation * (1.0f - extrapolation_weight) + extrapolation * extrapolation_weight;
  }
}

void RopeTable::apply(float* x, int dim, int64_t position, bool inverse) const {
  const int pairs = static_cast<int>(inv_freq_.size());
  float* r = x + dim - 2 * pairs;
  const float pos = static_cast<float>(position);
  for (int i = 0; i < pairs; ++i) {
    // The angle is one fp32 product, as transformers computes it (a K=1 fp32 matmul).
    const float angle = inv_freq_[i] * pos;
    const float c = std::cos(angle);
    const float s = inverse ? -std::sin(angle) : std::sin(angle);
    const float a = r[2 * i], b = r[2 * i + 1];
    r[2 * i] = a * c - b * s;
    r[2 * i + 1] = b * c + a * s;
  }
}

}  // namespace frank::engine
