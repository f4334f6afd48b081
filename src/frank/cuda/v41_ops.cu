// DeepSeek-V4.1's rounding and small dense ops (contracts in v41_ops.cuh): fake_quant, Engram's
// gather and gated mix, and the ratio-2 KV sources' pooling.
//
// fake_quant must give the CPU's bits (engine/fake_quant.cpp), so it repeats its fp32 operations
// one by one with explicitly rounded intrinsics (__fdiv_rn, __fmul_rn: nvcc would otherwise be free
// to contract a product into a following add) and the CPU's integer e4m3 encoder.
// engram_mix sums in double as the reference does (its gate's signed square root magnifies a
// rounding error of a small dot), then repeats the reference's fp32 steps. pool_groups repeats the
// reference's fp32 steps; only expf differs from std::exp (a few ulp).
#include <cmath>
#include <cstdint>

#include "frank/cuda/kv_rows.cuh"
#include "frank/cuda/launch.cuh"
#include "frank/cuda/v41_ops.cuh"

namespace frank::cuda {
namespace {

using engine::FakeQuant;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxBlocks = 8192;  // grid-stride kernels: enough blocks to fill the GPU
constexpr int kPoolThreads = 128;
constexpr int kMaxGridY = 65535;

constexpr float kFp8Max = 448.0f;
constexpr float kFp4Max = 6.0f;

unsigned grid_for(int64_t threads) {
  const int64_t blocks = (threads + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// ---- fake_quant --------------------------------------------------------------------------------

// std::clamp(v, lo, hi): NaN passes through.
__device__ float clamp(float v, float lo, float hi) { return v < lo ? lo : hi < v ? hi : v; }

// engine::pow2_ceil: 2^(exponent field - 127 + (mantissa != 0)), which is -126 .. 129 for t > 0
// (a subnormal gives 2^-126; 128 and up overflow to inf as exp2 does); -127 (t = 0) is 2^-127.
__device__ float pow2_ceil(float t) {
  const uint32_t bits = __float_as_uint(t);
  const int e = static_cast<int>((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0 ? 1 : 0);
  if (e >= 128) return __uint_as_float(0x7F800000u);
  if (e < -126) return 0x1p-127f;
  return __uint_as_float(static_cast<uint32_t>(e + 127) << 23);
}

// engine::float_to_e4m3_saturating step for step (round to nearest even, +-448 past the range),
// so no fp32 subnormal input depends on how the hardware's conversion treats it.
__device__ uint8_t e4m3_code(float x) {
  const uint32_t sign = (__float_as_uint(x) >> 24) & 0x80u;
  const float a = fabsf(x);
  if (a >= 448.f) return static_cast<uint8_t>(sign | 0x7Eu);
  // Subnormals m * 2^-9 (m = 0..7; m = 8 is the smallest normal, whose byte is also 8): a * 512
  // is exact, and __float2int_rn rounds half to even as nearbyint.
  if (a < 0x1p-6f) return static_cast<uint8_t>(sign | static_cast<uint32_t>(__float2int_rn(__fmul_rn(a, 512.f))));
  // Normal: keep 3 of fp32's 23 mantissa bits, round half to even; a carry bumps the exponent.
  const uint32_t bits = __float_as_uint(a);
  int exponent = static_cast<int>(bits >> 23) - 127;
  uint32_t mantissa = (bits & 0x7FFFFFu) >> 20;
  const uint32_t rest = bits & 0xFFFFFu;
  if (rest > 0x80000u || (rest == 0x80000u && (mantissa & 1u))) ++mantissa;
  if (mantissa == 8) mantissa = 0, ++exponent;
  return static_cast<uint8_t>(sign | (static_cast<uint32_t>(exponent + 7) << 3) | mantissa);
}

// e4m3(q) as fp32 (the CPU's e4m3_value(float_to_e4m3_saturating(q))).
__device__ float e4m3_round(float q) { return e4m3_to_float(e4m3_code(q)); }

// engine::e2m1_code's value times s for q in [-6, 6]: the magnitude code counts the thresholds
// |q| reaches (ties to the even code), and the negative-zero code gives +0 as transformers' table.
__device__ float e2m1_round(float q, float s) {
  const float m = fabsf(q);
  const unsigned c = (m >= 0x1.000002p-2f) + (m >= 0.75f) + (m >= 0x1.400002p+0f) + (m >= 1.75f) +
                     (m >= 0x1.400002p+1f) + (m >= 3.5f) + (m >= 0x1.400002p+2f);
  if (c == 0) return 0.0f;
  // e2m1 magnitudes: code 1 is 0.5, codes 2..7 are 2^(c/2 - 1) * (1 + (c & 1) / 2).
  const float v = c == 1 ? 0.5f : __uint_as_float(((c / 2 + 126u) << 23) | ((c & 1u) << 22));
  return __fmul_rn(signbit(q) ? -v : v, s);
}

// The block's scale from its largest magnitude, per grid (engine::fake_quant_*).
template <FakeQuant G>
__device__ float block_scale(float amax) {
  if constexpr (G == FakeQuant::Fp8Ue8m0)
    return pow2_ceil(__fmul_rn(fmaxf(amax, 1e-4f), static_cast<float>(1.0 / kFp8Max)));
  else if constexpr (G == FakeQuant::Fp4E4m3)
    return e4m3_round(__fdiv_rn(fmaxf(amax, 6.0f * 0x1p-9f), kFp4Max));
  else
    return pow2_ceil(__fmul_rn(fmaxf(amax, 6.0f * 0x1p-126f), static_cast<float>(1.0 / kFp4Max)));
}

template <FakeQuant G>
__device__ float round_value(float x, float s) {
  if constexpr (G == FakeQuant::Fp8Ue8m0)
    return __fmul_rn(e4m3_round(clamp(__fdiv_rn(x, s), -kFp8Max, kFp8Max)), s);
  else
    return e2m1_round(clamp(__fdiv_rn(x, s), -kFp4Max, kFp4Max), s);
}

// `lanes` lanes (a power of two <= 32) per block of `block` values, 32 / lanes blocks per warp:
// the block's amax by a max over its lanes (order-free: the max of non-NaN values is one value, and
// fmaxf skips a NaN as std::max(amax, NaN) does), then every value rounded by the lane that read it.
template <FakeQuant G>
__global__ void __launch_bounds__(kThreads) fake_quant_kernel(float* x, int64_t blocks, int block, int lanes) {
  follow_previous_kernel();
  const int lane = threadIdx.x & 31, per_warp = 32 / lanes, li = lane % lanes;
  const int64_t warps = int64_t{gridDim.x} * kWarps;
  // The loop bound is the warp's, so all 32 lanes reach every shuffle.
  for (int64_t w = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; w * per_warp < blocks; w += warps) {
    const int64_t b = w * per_warp + lane / lanes;
    float* p = x + b * block;
    float amax = 0.0f;
    if (b < blocks)
      for (int i = li; i < block; i += lanes) amax = fmaxf(amax, fabsf(p[i]));
    for (int o = lanes / 2; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    if (b >= blocks) continue;
    const float s = block_scale<G>(amax);
    for (int i = li; i < block; i += lanes) p[i] = round_value<G>(p[i], s);
  }
}

// ---- Engram ------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads) engram_gather_kernel(const float* table, int64_t table_rows, int head_dim,
                                                                 const int64_t* row_ids, int64_t count, float* out) {
  follow_previous_kernel();
  const int64_t total = count * head_dim;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = row_ids[i / head_dim];
    out[i] = r >= 0 && r < table_rows ? table[r * head_dim + i % head_dim] : 0.0f;
  }
}

__device__ double warp_sum_double(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
  return v;
}

// Block (t, k): stream k of token t. The three sums in double, in the block's fixed order; thread
// 0 makes the gate with the reference's roundings; every thread then adds its own columns.
__global__ void __launch_bounds__(kThreads) engram_mix_kernel(float* streams, int N, int D, const float* kv,
                                                              const float* q_weight, const float* k_weight, float eps) {
  follow_previous_kernel();
  __shared__ double red[3][kWarps];
  __shared__ float gate;
  const int64_t t = blockIdx.x;
  const int k = blockIdx.y;
  float* x = streams + (t * N + k) * D;
  const float* key = kv + t * (N + 1) * D + int64_t{k} * D;
  const float* value = kv + t * (N + 1) * D + int64_t{N} * D;
  const float* qw = q_weight + int64_t{k} * D;
  const float* kw = k_weight + int64_t{k} * D;
  double dot = 0.0, x_sq = 0.0, key_sq = 0.0;
  for (int d = threadIdx.x; d < D; d += kThreads) {
    const double xd = x[d], kd = key[d];
    dot += xd * __fmul_rn(qw[d], kw[d]) * kd;  // the weight's product in fp32 first, as the reference
    x_sq += xd * xd;
    key_sq += kd * kd;
  }
  dot = warp_sum_double(dot), x_sq = warp_sum_double(x_sq), key_sq = warp_sum_double(key_sq);
  const int warp = threadIdx.x / 32;
  if ((threadIdx.x & 31) == 0) red[0][warp] = dot, red[1][warp] = x_sq, red[2][warp] = key_sq;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s[3] = {0.0, 0.0, 0.0};
    for (int i = 0; i < 3; ++i)
      for (int w = 0; w < kWarps; ++w) s[i] += red[i][w];
    // The reference's steps: each rstd rounded to fp32, their product, dot in fp32 times them, then
    // times 1/sqrt(D) in double.
    const double e = eps;
    const float rstd = __fmul_rn(__double2float_rn(__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(__ddiv_rn(s[1], D), e)))),
                                 __double2float_rn(__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(__ddiv_rn(s[2], D), e)))));
    const double inv_sqrt_d = __ddiv_rn(1.0, __dsqrt_rn(static_cast<double>(D)));
    const float d_k = __double2float_rn(__dmul_rn(__fmul_rn(__double2float_rn(s[0]), rstd), inv_sqrt_d));
    // Signed square root: copysign keeps the sign of a zero dot (reference notes W7).
    const float r = copysignf(__fsqrt_rn(fmaxf(fabsf(d_k), 1e-6f)), d_k);
    gate = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-r)));
  }
  __syncthreads();
  const float g = gate;
  for (int d = threadIdx.x; d < D; d += kThreads) x[d] = __fadd_rn(x[d], __fmul_rn(g, value[d]));
}

// ---- pooling -----------------------------------------------------------------------------------

// Thread (d, y): channel d of groups y, y + gridDim.y, .. of those the chunk closes. Group 0 is the
// only one with rows before *start (in pending); the threads of grid row 0 read it first and then
// write the open group's rows into pending, so the same thread reads a pending value before it is
// overwritten.
__global__ void __launch_bounds__(kPoolThreads)
    pool_groups_kernel(float* pending_kv, float* pending_gate, const float* kv, const float* gate, int n,
                       const int64_t* start, int ratio, int dim, float* latents, int max_groups) {
  follow_previous_kernel();
  const int d = blockIdx.x * blockDim.x + threadIdx.x;
  if (d >= dim) return;
  const int64_t s = *start, g0 = s / ratio, end = s + n;
  const int64_t closed = end / ratio - g0, groups = closed < max_groups ? closed : max_groups;
  for (int64_t k = blockIdx.y; k < groups; k += gridDim.y) {
    const int64_t p0 = (g0 + k) * ratio;  // the group's first position
    auto row = [&](const float* chunk, const float* pending, int j) {
      const int64_t p = p0 + j;
      return p < s ? pending[int64_t{j} * dim + d] : chunk[(p - s) * dim + d];
    };
    // CpuOps::pool_groups' order: the max, the sum of e_j, then sum_j kv_j * (e_j / sum).
    float mx = -INFINITY;
    for (int j = 0; j < ratio; ++j) mx = fmaxf(mx, row(gate, pending_gate, j));
    float sum = 0.0f;
    for (int j = 0; j < ratio; ++j) sum = __fadd_rn(sum, expf(__fsub_rn(row(gate, pending_gate, j), mx)));
    float acc = 0.0f;
    for (int j = 0; j < ratio; ++j) {
      const float e = expf(__fsub_rn(row(gate, pending_gate, j), mx));  // the same bits as in sum
      acc = __fadd_rn(acc, __fmul_rn(row(kv, pending_kv, j), __fdiv_rn(e, sum)));
    }
    latents[k * dim + d] = acc;
  }
  if (blockIdx.y != 0) return;
  // The group left open: its rows from this chunk (positions from max(its start, *start)).
  const int64_t open = end / ratio * ratio;
  for (int64_t p = open > s ? open : s; p < end; ++p) {
    pending_kv[(p % ratio) * dim + d] = kv[(p - s) * dim + d];
    pending_gate[(p % ratio) * dim + d] = gate[(p - s) * dim + d];
  }
}

}  // namespace

cudaError_t fake_quant(float* x, int64_t count, int width, FakeQuant grid, int block, cudaStream_t stream) {
  if (!x || count < 0 || width < 1 || count % width != 0) return cudaErrorInvalidValue;
  if (count == 0 || block < 1 || width % block != 0) return cudaSuccess;  // left unrounded, as transformers
  const int64_t blocks = count / block;
  const int lanes = block < 32 && 32 % block == 0 ? block : 32;
  const unsigned g = grid_for((blocks + 32 / lanes - 1) / (32 / lanes) * 32);
  switch (grid) {
    case FakeQuant::Fp8Ue8m0:
      return launch_dependent(fake_quant_kernel<FakeQuant::Fp8Ue8m0>, dim3(g), dim3(kThreads), 0, stream, x, blocks,
                              block, lanes);
    case FakeQuant::Fp4E4m3:
      return launch_dependent(fake_quant_kernel<FakeQuant::Fp4E4m3>, dim3(g), dim3(kThreads), 0, stream, x, blocks,
                              block, lanes);
    case FakeQuant::Fp4Ue8m0:
      return launch_dependent(fake_quant_kernel<FakeQuant::Fp4Ue8m0>, dim3(g), dim3(kThreads), 0, stream, x, blocks,
                              block, lanes);
  }
  return cudaErrorInvalidValue;
}

cudaError_t engram_gather(const float* table, int64_t table_rows, int head_dim, const int64_t* row_ids, int64_t count,
                          float* out, cudaStream_t stream) {
  if (!table || !row_ids || !out || table_rows < 0 || head_dim < 1 || count < 0) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  return launch_dependent(engram_gather_kernel, dim3(grid_for(count * head_dim)), dim3(kThreads), 0, stream, table,
                          table_rows, head_dim, row_ids, count, out);
}

cudaError_t engram_mix(float* streams, int n, int N, int D, const float* kv, const float* q_weight,
                       const float* k_weight, float eps, cudaStream_t stream) {
  if (!streams || !kv || !q_weight || !k_weight || n < 0 || N < 1 || N > kMaxGridY || D < 1)
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return launch_dependent(engram_mix_kernel, dim3(static_cast<unsigned>(n), static_cast<unsigned>(N)), dim3(kThreads),
                          0, stream, streams, N, D, kv, q_weight, k_weight, eps);
}

cudaError_t pool_groups(float* pending_kv, float* pending_gate, const float* kv, const float* gate, int n,
                        const int64_t* start, int ratio, int dim, float* latents, int max_groups, cudaStream_t stream) {
  if (!pending_kv || !pending_gate || !kv || !gate || !start || n < 0 || ratio < 1 || dim < 1 || max_groups < 0 ||
      (max_groups > 0 && !latents))
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;  // nothing closes, nothing is left pending
  const unsigned y = static_cast<unsigned>(max_groups < 1 ? 1 : max_groups < kMaxGridY ? max_groups : kMaxGridY);
  return launch_dependent(pool_groups_kernel, dim3((dim + kPoolThreads - 1) / kPoolThreads, y), dim3(kPoolThreads), 0,
                          stream, pending_kv, pending_gate, kv, gate, n, start, ratio, dim, latents, max_groups);
}

}  // namespace frank::cuda
