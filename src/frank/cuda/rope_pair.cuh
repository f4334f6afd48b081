#pragma once
// RoPE of one interleaved pair, shared by the kernels that rotate (dense_ops.cu's rope and
// rms_norm_rope, attention.cu's undoing of the K=V rotation).
#include <cstdint>

namespace frank::cuda {

// (a, b) rotated by angle = inv_freq * position: one fp32 product, then cosf/sinf, as
// engine::RopeTable::apply; `inverse` negates the angle.
__device__ inline void rotate_pair(float& a, float& b, float inv_freq, int64_t position, bool inverse) {
  const float angle = inv_freq * static_cast<float>(position);
  const float c = cosf(angle), s = inverse ? -sinf(angle) : sinf(angle);
  const float x = a, y = b;
  a = x * c - y * s;
  b = y * c + x * s;
}

}  // namespace frank::cuda
