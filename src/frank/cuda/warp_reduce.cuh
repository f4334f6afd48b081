#pragma once
// Sums across the lanes of a warp and the warps of a block, shared by the kernels. Each fixes its
// order of additions, so a kernel that uses them gives bit-identical results run after run.
#include <cuda_runtime.h>

namespace frank::cuda {

// A butterfly: every lane ends with the same bits (each step adds the same two values).
__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Sum over the block; every thread gets it. `red` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = warp_sum(v);
  __syncthreads();  // red may still be read by a previous call
  if ((threadIdx.x & 31) == 0) red[warp] = v;
  __syncthreads();
  float s = 0.0f;
  for (int i = 0; i < warps; ++i) s += red[i];
  return s;
}

// Sums v[0..M) over the warp, M a power of two <= 32: each step hands half of the values a lane
// still holds to its partner and adds the other half (M - 1 + log2(32 / M) shuffles instead of
// 5 M); lane l ends with the total of v[l / (32 / M)]. Recursion, not a loop, so every index is a
// constant and v stays in registers.
template <int M, int Off = 16>
__device__ __forceinline__ float reduce_scatter(float* v, int lane) {
  if constexpr (Off == 0) {
    return v[0];
  } else if constexpr (M == 1) {
    v[0] += __shfl_xor_sync(0xffffffffu, v[0], Off);
    return reduce_scatter<1, Off / 2>(v, lane);
  } else {
    constexpr int H = M / 2;
    const bool upper = lane & Off;  // keeps v[H..M), its partner v[0..H)
#pragma unroll
    for (int i = 0; i < H; ++i) {
      const float mine = upper ? v[i + H] : v[i], theirs = upper ? v[i] : v[i + H];
      v[i] = mine + __shfl_xor_sync(0xffffffffu, theirs, Off);
    }
    return reduce_scatter<H, Off / 2>(v, lane);
  }
}

}  // namespace frank::cuda
