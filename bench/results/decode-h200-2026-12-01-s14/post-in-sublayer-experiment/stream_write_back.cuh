#pragma once
// An mHC site's write-back (hc_post, ops.cuh) done by the kernel that computes the site's sublayer
// output, as it stores each value, instead of by a kernel of its own: linear (the attention's
// o_b_proj) and the MoE's last down pass take one (ops.cuh). Each output value's thread reads the
// old values of the N streams at its d and writes the N new ones; no other thread touches them.
// post_kernel (hyper_connection.cu) runs the same code, so both give the same bits.
#include <cstdint>

#include "frank/cuda/ops.cuh"

namespace frank::cuda {

// streams[t][k*D + d] <- post[k] * sub + sum_j comb[j*N + k] * streams[t][j*D + d] for every k,
// the old values on the right (mix row t = [pre | post | comb]). For N <= 4 (every DeepSeek-V4
// model) every value is loaded into registers before the first store: the compiler cannot know
// that the stores miss the mix, and would otherwise load it again after each, one L2 round trip
// after another. Larger N take the loop. Both sum in the same order: the same bits.
__device__ inline void write_back(const WriteBack& b, int64_t t, int64_t d, int64_t D, float sub) {
  constexpr int S = 4;
  const int N = b.N;
  float* s = b.streams + t * N * D + d;
  const float* post = b.mix + t * (2 * N + N * N) + N;
  const float* comb = post + N;
  if (N <= S) {
    float old[S], p[S], c[S][S];  // bound checks with constant indices: all in registers
#pragma unroll
    for (int j = 0; j < S; ++j) {
      old[j] = j < N ? s[int64_t{j} * D] : 0.0f;
      p[j] = j < N ? post[j] : 0.0f;
#pragma unroll
      for (int k = 0; k < S; ++k) c[j][k] = j < N && k < N ? comb[j * N + k] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < S; ++k) {
      if (k >= N) break;
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < S; ++j)
        if (j < N) acc = fmaf(c[j][k], old[j], acc);
      s[int64_t{k} * D] = fmaf(p[k], sub, acc);
    }
    return;
  }
  float old[kMaxStreamCount];
#pragma unroll
  for (int j = 0; j < kMaxStreamCount; ++j) old[j] = j < N ? s[int64_t{j} * D] : 0.0f;
  for (int k = 0; k < N; ++k) {
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxStreamCount; ++j)
      if (j < N) acc = fmaf(comb[j * N + k], old[j], acc);
    s[int64_t{k} * D] = fmaf(post[k], sub, acc);
  }
}

// Asks the L2 for what write_back(b, t, d, D, ..) will read: the old stream values (written a
// sublayer earlier, by then usually out of the L2) and the mix row. A kernel calls it as it starts,
// so that the write-back at its end does not wait for HBM. (Only a hint: the L2 is where writes
// land, so it is safe before the kernel's dependency wait.)
__device__ inline void prefetch_write_back(const WriteBack& b, int64_t t, int64_t d, int64_t D) {
  const int N = b.N;
  const float* s = b.streams + t * N * D + d;
  for (int j = 0; j < N; ++j) asm volatile("prefetch.global.L2 [%0];" ::"l"(s + int64_t{j} * D));
  asm volatile("prefetch.global.L2 [%0];" ::"l"(b.mix + t * (2 * N + N * N)));
}

}  // namespace frank::cuda
