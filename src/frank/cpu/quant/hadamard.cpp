#include "frank/cpu/quant/hadamard.h"

namespace frank::cpu {

void hadamard128_blocks(float* v, std::int64_t n) {
  constexpr float kInvSqrt128 = 0.088388347648f;  // ExLlamaV3's hadamard_inner.cuh constant
  for (std::int64_t base = 0; base < n; base += kHadamardBlock) {
    float* b = v + base;
    for (int half = 1; half < kHadamardBlock; half *= 2)
      for (int i = 0; i < kHadamardBlock; i += 2 * half)
        for (int j = i; j < i + half; ++j) {
          const float a = b[j], c = b[j + half];
          b[j] = a + c;
          b[j + half] = a - c;
        }
    for (int i = 0; i < kHadamardBlock; ++i) b[i] *= kInvSqrt128;
  }
}

}  // namespace frank::cpu
