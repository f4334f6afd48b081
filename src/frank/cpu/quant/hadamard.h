#pragma once
// The orthonormal 128-point Walsh-Hadamard transform ExLlamaV3 wraps its EXL3 weights in
// (docs/exl3-format.md §2, shared docs): H[i][j] = (-1)^popcount(i & j) / sqrt(128), natural
// (Sylvester) order, so H is symmetric and its own inverse.
#include <cstdint>

namespace frank::cpu {

constexpr int kHadamardBlock = 128;

// v[128b .. 128b + 127] <- H v[128b .. 128b + 127] for every block b; `n` must be a multiple of 128.
// In fp32: seven butterfly stages (a + b, a - b), then one multiply by 1/sqrt(128) (the constant
// ExLlamaV3's kernels use), so every element's rounding is fixed whatever the compiler vectorises.
void hadamard128_blocks(float* v, std::int64_t n);

}  // namespace frank::cpu
