// EXL3 decode and GEMV kernels (exl3_gemv.h).
//
// The GEMV, y = svh ∘ H(Q^T u) with u = H(suh ∘ x), in two launches:
//  1. gemv_kernel, grid (output blocks of 128, k slices): a slice is whole 128-input blocks. For
//     each, the block's first n warps compute u over those inputs (one token each, in registers
//     and shuffles), then warp j decodes output tile j of each of the 8 input tiles, each lane its
//     8 elements of every tile (exl3_tile.cuh), and accumulates u · q with fma. The trellis words
//     of all 8 tiles are loaded before u is computed, so the loads overlap that work. At the end
//     the 4 lanes of each column add their sums and the slice's partial z goes to scratch.
//  2. output_kernel: z = the slices' partials added in slice order, y = svh ∘ H(z).
// Both are launched dependent (launch.cuh), so each one's launch overlaps the previous kernel.
// Every sum has a fixed order (no atomics), so a shape gives the same bits on every run. The order
// is not the CPU reference's, so y differs from cpu::linear_rows by rounding only (the test's bound).
#include <algorithm>
#include <type_traits>

#include "frank/cuda/exl3_gemv.h"
#include "frank/cuda/exl3_block.cuh"
#include "frank/cuda/launch.cuh"

namespace frank::cuda {
namespace {

using namespace exl3;

constexpr int kMaxTokens = 8;
constexpr int kWarps = kTilesPerBlock, kThreads = 32 * kWarps;  // warp j: output tile j of the block
// The k split aims at this many thread blocks (8 warps each): a few per SM of an H200 (132 SMs),
// enough to keep every SM streaming. A constant, not the device's SM count, so that a shape's
// summation order, and so its bits, is the same on every GPU.
constexpr int64_t kTargetBlocks = 512;

// One thread per element of Q (cpu::decode).
__global__ void decode_kernel(Exl3DeviceMatrix w, uint16_t* q) {
  const int64_t rows = padded(w.rows), cols = padded(w.cols);
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= rows * cols) return;
  const int64_t k = index / rows, n = index % rows;
  const uint16_t* tile = w.trellis + ((k / kTileSide) * (rows / kTileSide) + n / kTileSide) * (16 * w.bits);
  const float v = codebook_value(w.codebook, position_state(tile, w.bits, static_cast<int>(k % kTileSide),
                                                           static_cast<int>(n % kTileSide)));
  q[index] = __half_as_ushort(__float2half_rn(v));
}

// One warp per tile, each lane decoding its eight elements as gemv_kernel does (LaneStates).
template <int K>
__global__ void decode_lanes_kernel(Exl3DeviceMatrix w, uint16_t* q) {
  using States = LaneStates<K>;
  const int64_t rows = padded(w.rows), tiles_n = rows / kTileSide;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (tile >= tiles_n * (padded(w.cols) / kTileSide)) return;
  const int lane = threadIdx.x % 32;
  const States states(lane);
  uint32_t words[States::kWords];
  states.load(reinterpret_cast<const uint32_t*>(w.trellis) + tile * States::kTileWords, words);
  float v[8];
  states.decode(w.codebook, words, v);
  const int64_t kt = tile / tiles_n, nt = tile % tiles_n;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    q[(kt * kTileSide + States::row(lane, i)) * rows + nt * kTileSide + States::column(lane, i)] =
        __half_as_ushort(__float2half_rn(v[i]));
}

// partial[slice, t, c] = sum over the slice's inputs i of u_t[i] q[i][c] for the block's 128
// outputs c and tokens t < n; N >= n is the kernel's token capacity.
template <int K, int N>
__global__ void __launch_bounds__(kThreads)
    gemv_kernel(Exl3DeviceMatrix w, const float* x, int n, int blocks_per_slice, float* partial) {
  follow_previous_kernel();
  __shared__ __align__(16) float u[N][kBlock];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t rows = padded(w.rows), tiles_n = rows / kTileSide, k_blocks = padded(w.cols) / kBlock;
  const int64_t nt = static_cast<int64_t>(blockIdx.x) * kTilesPerBlock + warp;
  const int64_t kb_begin = static_cast<int64_t>(blockIdx.y) * blocks_per_slice;
  const int64_t kb_end = kb_begin + blocks_per_slice < k_blocks ? kb_begin + blocks_per_slice : k_blocks;
  const LaneStates<K> states(lane);
  float acc[N][2];  // columns lane / 4 and lane / 4 + 8 of output tile nt (States::column)
#pragma unroll
  for (int t = 0; t < N; ++t) acc[t][0] = acc[t][1] = 0.0f;
  for (int64_t kb = kb_begin; kb < kb_end; ++kb) {
    BlockWords<K> block;
    block.load(states, w.trellis, kb, tiles_n, nt);
    __syncthreads();  // every warp is done with the previous block's u
    if (warp < N) {
      const float* xt = x + static_cast<int64_t>(warp) * w.cols;
      input_block(w.suh, w.cols, kb, warp < n, [&](int64_t i) { return xt[i]; }, u[warp]);
    }
    __syncthreads();
    block.accumulate(states, w.codebook, u, acc);
  }
  column_sums(acc);
  if (lane % 4 != 0) return;
#pragma unroll
  for (int t = 0; t < N; ++t)
    if (t < n)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        partial[(static_cast<int64_t>(blockIdx.y) * n + t) * rows + nt * kTileSide + lane / 4 + 8 * h] = acc[t][h];
}

// y[t] = svh ∘ H(z_t) for one output block, z_t = the slices' partials added in slice order; warp
// t handles token t (the output half of cpu::linear_rows).
__global__ void output_kernel(Exl3DeviceMatrix w, const float* partial, int slices, int n, float* y) {
  follow_previous_kernel();
  const int t = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t rows = padded(w.rows), first = static_cast<int64_t>(blockIdx.x) * kBlock + 4 * lane;
  float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 8  // independent loads in flight (L2 latency), the adds still in slice order
  for (int s = 0; s < slices; ++s) {
    const float4 p = *reinterpret_cast<const float4*>(partial + (static_cast<int64_t>(s) * n + t) * rows + first);
    z[0] = __fadd_rn(z[0], p.x);
    z[1] = __fadd_rn(z[1], p.y);
    z[2] = __fadd_rn(z[2], p.z);
    z[3] = __fadd_rn(z[3], p.w);
  }
  output_block(z, w.svh, w.rows, first, y + t * w.rows);
}

bool valid(const Exl3DeviceMatrix& w) {
  return w.trellis != nullptr && w.suh != nullptr && w.svh != nullptr && w.rows > 0 && w.cols > 0 && w.bits >= 1 &&
         w.bits <= 8 && reinterpret_cast<uintptr_t>(w.trellis) % 4 == 0;
}

// 128-input blocks per k slice: as many slices as bring the grid to kTargetBlocks, at most one per
// input block.
int64_t blocks_per_slice(const Exl3DeviceMatrix& w) {
  const int64_t out_blocks = w.padded_rows() / kBlock, k_blocks = w.padded_cols() / kBlock;
  const int64_t slices = std::clamp<int64_t>((kTargetBlocks + out_blocks - 1) / out_blocks, 1, k_blocks);
  return (k_blocks + slices - 1) / slices;
}

template <int K, int N>
cudaError_t launch_gemv(const Exl3DeviceMatrix& w, const float* x, int n, int64_t per_slice, int64_t slices,
                        float* partial, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(w.padded_rows() / kBlock), static_cast<unsigned>(slices));
  return launch_dependent(gemv_kernel<K, N>, grid, dim3(kThreads), 0, stream, w, x, n, static_cast<int>(per_slice),
                          partial);
}

// The kernel for n tokens: capacity 1, 2, 4 or 8.
template <int K>
cudaError_t launch_gemv_tokens(const Exl3DeviceMatrix& w, const float* x, int n, int64_t per_slice, int64_t slices,
                               float* partial, cudaStream_t stream) {
  if (n == 1) return launch_gemv<K, 1>(w, x, n, per_slice, slices, partial, stream);
  if (n == 2) return launch_gemv<K, 2>(w, x, n, per_slice, slices, partial, stream);
  if (n <= 4) return launch_gemv<K, 4>(w, x, n, per_slice, slices, partial, stream);
  return launch_gemv<K, kMaxTokens>(w, x, n, per_slice, slices, partial, stream);
}

}  // namespace

int64_t exl3_linear_scratch_floats(const Exl3DeviceMatrix& w, int n) {
  return w.padded_cols() / kBlock * n * w.padded_rows();  // at most one slice per input block
}

cudaError_t exl3_decode(const Exl3DeviceMatrix& w, uint16_t* q, cudaStream_t stream) {
  if (!valid(w) || q == nullptr) return cudaErrorInvalidValue;
  const int64_t elements = w.padded_rows() * w.padded_cols();
  decode_kernel<<<static_cast<unsigned>((elements + 255) / 256), 256, 0, stream>>>(w, q);
  return cudaGetLastError();
}

cudaError_t exl3_decode_lanes(const Exl3DeviceMatrix& w, uint16_t* q, cudaStream_t stream) {
  if (!valid(w) || q == nullptr) return cudaErrorInvalidValue;
  const int64_t tiles = w.padded_rows() / kTileSide * (w.padded_cols() / kTileSide);
  return with_bits(w.bits, [&](auto bits) {
    decode_lanes_kernel<decltype(bits)::value>
        <<<static_cast<unsigned>((tiles + kWarps - 1) / kWarps), kThreads, 0, stream>>>(w, q);
    return cudaGetLastError();
  });
}

cudaError_t exl3_linear(const Exl3DeviceMatrix& w, const float* x, int n, float* scratch, float* y,
                        cudaStream_t stream) {
  if (!valid(w) || n < 1 || n > kMaxTokens || x == nullptr || scratch == nullptr || y == nullptr)
    return cudaErrorInvalidValue;
  const int64_t per_slice = blocks_per_slice(w);
  const int64_t slices = (w.padded_cols() / kBlock + per_slice - 1) / per_slice;
  const auto gemv = [&](auto bits) {
    return launch_gemv_tokens<decltype(bits)::value>(w, x, n, per_slice, slices, scratch, stream);
  };
  if (const cudaError_t e = with_bits(w.bits, gemv)) return e;
  return launch_dependent(output_kernel, dim3(static_cast<unsigned>(w.padded_rows() / kBlock)), dim3(32 * n), 0,
                          stream, w, static_cast<const float*>(scratch), static_cast<int>(slices), n, y);
}

}  // namespace frank::cuda
