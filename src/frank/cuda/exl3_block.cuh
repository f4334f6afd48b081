#pragma once
// The device pieces of an EXL3 GEMV over one block of 128 inputs (cpu::linear_rows' operations),
// shared by exl3_linear (exl3_gemv.cu) and the MoE's EXL3 experts (exl3_moe.cu): the input
// transform u = H(suh ∘ x) by one warp, warp j's tile of Q^T u over the block's 8 input tiles (each
// lane its 8 elements of every tile, exl3_tile.cuh), the sums of a column's 4 lanes, and the
// output transform y = svh ∘ H(z) by one warp.
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "frank/cuda/exl3_tile.cuh"

namespace frank::cuda::exl3 {

constexpr int kBlock = 128, kTilesPerBlock = kBlock / kTileSide;
constexpr float kInvSqrt128 = 0.088388347648f;  // cpu::hadamard128_blocks

__device__ __forceinline__ int64_t padded(int64_t features) { return (features + kBlock - 1) / kBlock * kBlock; }

// v <- H v over one 128-block held by a warp, lane l holding elements 4l .. 4l + 3: the butterflies
// of cpu::hadamard128_blocks in its order (half = 1, 2 in registers, 4 .. 64 across lanes; the low
// element gets a + c, the high one a - c), then the scale.
__device__ __forceinline__ void warp_hadamard128(float (&v)[4]) {
  const auto butterfly = [](float& a, float& c) {
    const float sum = __fadd_rn(a, c), difference = __fsub_rn(a, c);
    a = sum;
    c = difference;
  };
  butterfly(v[0], v[1]);
  butterfly(v[2], v[3]);
  butterfly(v[0], v[2]);
  butterfly(v[1], v[3]);
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int m = 1; m < 32; m *= 2) {  // half = 4m: the partner is lane l ^ m
    const bool low = (lane & m) == 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float other = __shfl_xor_sync(0xFFFFFFFFu, v[e], m);
      v[e] = low ? __fadd_rn(v[e], other) : __fsub_rn(other, v[e]);
    }
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) v[e] = __fmul_rn(v[e], kInvSqrt128);
}

// u = H(suh ∘ x) over inputs 128 kb .. 128 kb + 127, by one warp (the input half of
// cpu::linear_rows, the same operations): x(i) is input i; zero past `cols`, and everywhere when
// !active (a padding token: it adds nothing).
template <class Input>
__device__ __forceinline__ void input_block(const uint16_t* suh, int64_t cols, int64_t kb, bool active,
                                            const Input& x, float* u) {
  const int lane = threadIdx.x % 32;
  float v[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int64_t i = kb * kBlock + 4 * lane + e;
    v[e] = active && i < cols ? __fmul_rn(x(i), half_bits(suh[i])) : 0.0f;
  }
  warp_hadamard128(v);
  *reinterpret_cast<float4*>(u + 4 * lane) = make_float4(v[0], v[1], v[2], v[3]);
}

// The trellis words a lane needs of output tile nt over the 8 input tiles of block kb (a trellis
// of tiles_n output tiles per input tile row).
template <int K>
struct BlockWords {
  uint32_t words[kTilesPerBlock][LaneStates<K>::kWords];

  __device__ __forceinline__ void load(const LaneStates<K>& states, const uint16_t* trellis, int64_t kb,
                                       int64_t tiles_n, int64_t nt) {
    const auto* t = reinterpret_cast<const uint32_t*>(trellis);
#pragma unroll
    for (int i = 0; i < kTilesPerBlock; ++i)
      states.load(t + ((kb * kTilesPerBlock + i) * tiles_n + nt) * LaneStates<K>::kTileWords, words[i]);
  }

  // acc[t][h] += u_t · q over the block for the lane's columns (States::column: lane / 4 and
  // lane / 4 + 8), fma in input order; u[t] is token t's 128 transformed inputs (16-byte aligned).
  template <int N>
  __device__ __forceinline__ void accumulate(const LaneStates<K>& states, Exl3Codebook codebook,
                                             const float (*u)[kBlock], float (&acc)[N][2]) const {
    const int row0 = LaneStates<K>::row(threadIdx.x % 32, 0);  // the lane's rows: row0, +1, +8, +9
#pragma unroll
    for (int i = 0; i < kTilesPerBlock; ++i) {
      float q[8];
      states.decode(codebook, words[i], q);
#pragma unroll
      for (int t = 0; t < N; ++t) {
        const float2 near = *reinterpret_cast<const float2*>(&u[t][i * kTileSide + row0]);
        const float2 far = *reinterpret_cast<const float2*>(&u[t][i * kTileSide + row0 + 8]);
        const float ut[4] = {near.x, near.y, far.x, far.y};
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[t][e / 4] = fmaf(q[e], ut[e % 4], acc[t][e / 4]);
      }
    }
  }
};

// Each column's sum over its 4 lanes (lanes 4c .. 4c + 3 hold column c's partial sums), in a fixed
// order; every lane of the four gets it.
template <int N>
__device__ __forceinline__ void column_sums(float (&acc)[N][2]) {
#pragma unroll
  for (int t = 0; t < N; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      acc[t][h] = __fadd_rn(acc[t][h], __shfl_xor_sync(0xFFFFFFFFu, acc[t][h], 1));
      acc[t][h] = __fadd_rn(acc[t][h], __shfl_xor_sync(0xFFFFFFFFu, acc[t][h], 2));
    }
}

// y[first + e] = svh ∘ H(z)[e] for one 128-output block by one warp (the output half of
// cpu::linear_rows): lane l holds z of the block's outputs 4l .. 4l + 3, `first` the first of
// them; outputs past `rows` are dropped.
__device__ __forceinline__ void output_block(float (&z)[4], const uint16_t* svh, int64_t rows, int64_t first,
                                             float* y) {
  warp_hadamard128(z);
#pragma unroll
  for (int e = 0; e < 4; ++e)
    if (first + e < rows) y[first + e] = __fmul_rn(z[e], half_bits(svh[first + e]));
}

// f(std::integral_constant<int, K>{}) for K = bits (1..8): the kernels take K as a template
// parameter. cudaErrorInvalidValue for other bits.
template <typename F>
cudaError_t with_bits(int bits, const F& f) {
  switch (bits) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    case 8: return f(std::integral_constant<int, 8>{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace frank::cuda::exl3
