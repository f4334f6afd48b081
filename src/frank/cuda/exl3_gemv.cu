// EXL3 decode and GEMV kernels (exl3_gemv.h). Each kernel mirrors a CPU function named beside it,
// operation for operation.
#include <cuda_fp16.h>

#include "frank/cuda/exl3_gemv.h"

namespace frank::cuda {
namespace {

constexpr int kTileSide = 16, kBlock = 128, kTilesPerBlock = kBlock / kTileSide, kMaxTokens = 8;
constexpr float kInvSqrt128 = 0.088388347648f;  // cpu::hadamard128_blocks

__device__ __forceinline__ int64_t padded(int64_t features) { return (features + kBlock - 1) / kBlock * kBlock; }

// Word j of a tile: two little-endian uint16 (exl3_tile_states).
__device__ __forceinline__ uint32_t tile_word(const uint16_t* tile, int j) {
  return tile[2 * j] | (static_cast<uint32_t>(tile[2 * j + 1]) << 16);
}

// The trellis state at tile position (r, c): bitstream element t is the inverse of the tensor-core
// permutation (lane 4 (c mod 8) + (r mod 8) / 2, half c / 8, index r mod 2 + 2 (r / 8)); its state
// is the 16 stream bits ending at bit (t + 1) K, read circularly (exl3_tile_states).
__device__ __forceinline__ uint32_t position_state(const uint16_t* tile, int bits, int r, int c) {
  const int t = 8 * (4 * (c % 8) + (r % 8) / 2) + 4 * (c / 8) + (r % 2) + 2 * (r / 8);
  const int stream_bits = 256 * bits;
  const int start = ((t + 1) * bits - 16 + stream_bits) % stream_bits;
  const int first = start / 32;
  const uint64_t window =
      (static_cast<uint64_t>(tile_word(tile, first)) << 32) | tile_word(tile, (first + 1) % (8 * bits));
  return static_cast<uint32_t>(window >> (48 - start % 32)) & 0xFFFFu;
}

__device__ __forceinline__ float half_bits(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

// The codebook value of a state as fp32 holding an fp16 (exl3_codebook_value): the exact fp32
// sum or fma, rounded once to fp16.
__device__ __forceinline__ float codebook_value(Exl3Codebook codebook, uint32_t x) {
  float exact;
  if (codebook == Exl3Codebook::Mul1) {
    const uint32_t y = x * 0x83DCD12Du;
    const uint32_t sum = (y & 0xFFu) + ((y >> 8) & 0xFFu) + ((y >> 16) & 0xFFu) + (y >> 24);
    exact = __fadd_rn(__fmul_rn(static_cast<float>(1024u + sum), 1774.0f / 262144.0f), -1329.0f / 128.0f);
  } else {
    uint32_t y = codebook == Exl3Codebook::Mcg ? x * 0xCBAC1FEDu : x * 89226354u + 64248484u;
    y = (y & 0x8FFF8FFFu) ^ 0x3B603B60u;
    exact = __fadd_rn(half_bits(y & 0xFFFFu), half_bits(y >> 16));
  }
  return __half2float(__float2half_rn(exact));
}

// The normalised 128-point Hadamard of v (shared, 128 threads, one element each).
__device__ __forceinline__ void hadamard128(float* v) {
  const int i = threadIdx.x;
  for (int half = 1; half < kBlock; half *= 2) {
    __syncthreads();
    if ((i & half) == 0) {
      const float a = v[i], c = v[i + half];
      v[i] = __fadd_rn(a, c);
      v[i + half] = __fsub_rn(a, c);
    }
  }
  __syncthreads();
  v[i] = __fmul_rn(v[i], kInvSqrt128);
  __syncthreads();
}

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

// u[t] = H(suh ∘ x[t]) over one 128-block per thread block; grid (padded_cols / 128, n)
// (the input half of cpu::linear_rows).
__global__ void input_transform_kernel(Exl3DeviceMatrix w, const float* x, float* u) {
  __shared__ float v[kBlock];
  const int t = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  v[threadIdx.x] = i < w.cols ? __fmul_rn(x[t * w.cols + i], half_bits(w.suh[i])) : 0.0f;
  hadamard128(v);
  u[t * padded(w.cols) + i] = v[threadIdx.x];
}

// One output block per thread block, one output column per thread, all tokens: the tile partials
// and sums of exl3_kernels.h in their order, then y = svh ∘ H(z) (cpu::linear_rows).
__global__ void gemv_kernel(Exl3DeviceMatrix w, const float* u, int n, float* y) {
  __shared__ float z[kMaxTokens][kBlock];
  const int64_t cols = padded(w.cols), tiles_n = padded(w.rows) / kTileSide;
  const int column = threadIdx.x % kTileSide;
  const int64_t nt = static_cast<int64_t>(blockIdx.x) * kTilesPerBlock + threadIdx.x / kTileSide;
  float acc[kMaxTokens];
#pragma unroll
  for (int t = 0; t < kMaxTokens; ++t) acc[t] = 0.0f;
  for (int64_t kt = 0; kt < cols / kTileSide; ++kt) {
    const uint16_t* tile = w.trellis + (kt * tiles_n + nt) * (16 * w.bits);
    float partial[kMaxTokens];
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) partial[t] = 0.0f;
    for (int r = 0; r < kTileSide; ++r) {
      const float q = codebook_value(w.codebook, position_state(tile, w.bits, r, column));
#pragma unroll
      for (int t = 0; t < kMaxTokens; ++t)
        if (t < n) partial[t] = __fadd_rn(partial[t], __fmul_rn(u[t * cols + kt * kTileSide + r], q));
    }
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t)
      if (t < n) acc[t] = __fadd_rn(acc[t], partial[t]);
  }
  for (int t = 0; t < n; ++t) {
    z[t][threadIdx.x] = acc[t];
    hadamard128(z[t]);
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
    if (row < w.rows) y[t * w.rows + row] = __fmul_rn(z[t][threadIdx.x], half_bits(w.svh[row]));
  }
}

bool valid(const Exl3DeviceMatrix& w) {
  return w.trellis != nullptr && w.suh != nullptr && w.svh != nullptr && w.rows > 0 && w.cols > 0 && w.bits >= 1 &&
         w.bits <= 8;
}

}  // namespace

cudaError_t exl3_decode(const Exl3DeviceMatrix& w, uint16_t* q, cudaStream_t stream) {
  if (!valid(w) || q == nullptr) return cudaErrorInvalidValue;
  const int64_t elements = w.padded_rows() * w.padded_cols();
  decode_kernel<<<static_cast<unsigned>((elements + 255) / 256), 256, 0, stream>>>(w, q);
  return cudaGetLastError();
}

cudaError_t exl3_linear(const Exl3DeviceMatrix& w, const float* x, int n, float* u, float* y, cudaStream_t stream) {
  if (!valid(w) || n < 1 || n > kMaxTokens || x == nullptr || u == nullptr || y == nullptr)
    return cudaErrorInvalidValue;
  input_transform_kernel<<<dim3(static_cast<unsigned>(w.padded_cols() / kBlock), static_cast<unsigned>(n)), kBlock, 0,
                           stream>>>(w, x, u);
  if (const cudaError_t e = cudaGetLastError()) return e;
  gemv_kernel<<<static_cast<unsigned>(w.padded_rows() / kBlock), kBlock, 0, stream>>>(w, u, n, y);
  return cudaGetLastError();
}

}  // namespace frank::cuda
