// Dense ops of the forward pass (contract in ops.cuh): linear, linear_grouped, rms_norm, rope,
// rms_norm_rope, scale, embed_streams.
//
// linear and linear_grouped are GEMVs for a few tokens, bound by reading the weights once. A warp
// owns R = 4 consecutive output rows (each activation load serves 4 rows; one token of bf16: 2,
// launch_vector) and one of P parts of the `in` dimension; a block's 8 warps are 8/P row groups
// times P parts, so a small `out` still puts enough warps, and loads, in flight to keep HBM busy.
// The P partial sums of a row are added in shared memory in a fixed order (deterministic). Lanes
// take consecutive 16-byte chunks of a row (coalesced) and issue kUnroll x R weight loads before
// using any. Tokens are taken NT at a time (NT = 1, 2, 4 or 8, a template argument, so one token
// keeps few registers); each loaded weight is applied to all of them, so for n <= 8 every weight
// is read once. More tokens take further passes over the warp's rows, which the previous pass has
// just brought into L2.
//
// FP8 / FP4 weights (weight_format.h) take the same path: a lane's 16-byte load holds 16 e4m3 (in
// one FP8 block) or 32 e2m1 (one scale group), decoded 8 at a time with integer ops into fp16
// pairs (fp8_fp4_decode.h), widened to fp32 and multiplied by the block's power-of-two scale: each
// weight is exact, and the sums are those of the fp32 weights in the same order.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "frank/cuda/fp8_fp4_decode.h"
#include "frank/cuda/launch.cuh"
#include "frank/cuda/ops.cuh"
#include "frank/cuda/rope_pair.cuh"
#include "frank/cuda/warp_reduce.cuh"

namespace frank::cuda {
namespace {

constexpr int kTokens = 8;          // most tokens per pass over a weight row
constexpr int kLinearWarps = 8;     // warps per linear block
constexpr int kRows = 4;            // rows per warp on the 16-byte path
constexpr int kUnroll = 2;          // 32-lane steps of a row whose loads a lane issues together
constexpr int kTargetWarps = 4096;  // about 31 warps per SM of an H200 (132 SMs)
constexpr int kThreads = 256;       // threads per block of the element-wise kernels
constexpr int kNormThreads = 512;
constexpr int kMaxRopePairs = 256;  // rms_norm_rope keeps the rotated values in shared memory

// V consecutive activations as fp32: one plain load, one 16-byte load, or (8 values) two.
__device__ void load(const float* p, float (&v)[1]) { v[0] = __ldg(p); }
__device__ void load(const float* p, float (&v)[4]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p));
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
}
__device__ void load(const float* p, float (&v)[8]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// 16 bytes of weights, each used once: read-only, not kept in L1 (which keeps the activations),
// and with the L2 fetching the 256-byte block around them (the warp reads the rest next).
__device__ uint4 load_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Up to kMaxLinearOutputs weights of one type and `in` applied to one x in one launch (ops.cuh:
// linears). Output s has out[s] rows; its row o belongs to group o / group_rows[s], which reads x
// columns (o / group_rows[s]) * in ..; y[s] column o (a plain linear: one group). Row o's values
// start at byte o * row_bytes of w[s]. A quantised weight's scale of element (o, k) is the byte
// scales[s][(o >> row_shift) * scale_cols + (k >> col_shift)]: FP8 blocks of B x B (both shifts
// log2 B), FP4 groups of 32 along a row (0 and 5). Blocks first_block[s] .. first_block[s+1] - 1
// compute output s (a warp's rows never span two outputs).
struct LinearArgs {
  const float* x;
  int64_t ldx;
  int n;
  int64_t in, row_bytes, scale_cols;
  int row_shift, col_shift;
  int outputs;
  const void* w[kMaxLinearOutputs];
  const uint8_t* scales[kMaxLinearOutputs];
  int64_t out[kMaxLinearOutputs], group_rows[kMaxLinearOutputs];
  float* y[kMaxLinearOutputs];
  int64_t ldy[kMaxLinearOutputs];
  unsigned first_block[kMaxLinearOutputs + 1];
};

// The weight one block reads: output s of LinearArgs.
struct BlockWeight {
  const uint8_t* scales;
  int64_t out, scale_cols;
  int row_shift, col_shift;
};

// The scale factor of element (row, k) (block_scale_factor, fp8_fp4_decode.h).
__device__ float block_scale(const BlockWeight& a, int64_t row, int64_t k, uint32_t fp16_shift) {
  return block_scale_factor(__ldg(a.scales + (row >> a.row_shift) * a.scale_cols + (k >> a.col_shift)), fp16_shift);
}

// Chunk c of a row: V weights of type W, loaded as raw bits (with their scale, for the quantised
// types) and unpacked to fp32 kPiece at a time (piece p: elements p * kPiece ..), so a chunk of 16
// or 32 quantised weights keeps only 8 of them as floats at once. A 16-byte chunk holds 4 fp32,
// 8 bf16 (the high half of an fp32, element 2i in the low half of word i), 16 e4m3 or 32 e2m1;
// V = 1 is the scalar path (one element a lane). load(a, row, r, c): `row` points at row r's
// values (rows past the end: the last row), r is the row index unclamped: an FP8 block row is the
// same for a warp's 4 rows (4 | row0, 4 | B) even past the end, so their scale loads are one, while
// FP4's per-row scale clamps r itself.
template <class W, int V>
struct Chunk {
  static constexpr int kPiece = 1;
  W bits;
  __device__ void load(const BlockWeight&, const uint8_t* row, int64_t, int64_t c) {
    bits = __ldg(reinterpret_cast<const W*>(row) + c);
  }
  __device__ void unpack(int, float (&v)[1]) const {
    if constexpr (sizeof(W) == 4)
      v[0] = bits;
    else
      v[0] = __uint_as_float(uint32_t{bits} << 16);
  }
};
template <>
struct Chunk<float, 4> {
  static constexpr int kPiece = 4;
  uint4 bits;
  __device__ void load(const BlockWeight&, const uint8_t* row, int64_t, int64_t c) { bits = load_stream(row + c * 16); }
  __device__ void unpack(int, float (&v)[4]) const {
    v[0] = __uint_as_float(bits.x), v[1] = __uint_as_float(bits.y);
    v[2] = __uint_as_float(bits.z), v[3] = __uint_as_float(bits.w);
  }
};
template <>
struct Chunk<uint16_t, 8> {
  static constexpr int kPiece = 8;
  uint4 bits;
  __device__ void load(const BlockWeight&, const uint8_t* row, int64_t, int64_t c) { bits = load_stream(row + c * 16); }
  __device__ void unpack(int, float (&v)[8]) const {
    const uint32_t words[4] = {bits.x, bits.y, bits.z, bits.w};
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = __uint_as_float(words[i] << 16);
      v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  }
};
// 16 e4m3: word i holds elements 4i .. 4i+3 (byte j: element 4i + j); one FP8 block.
template <>
struct Chunk<Fp8, 16> {
  static constexpr int kPiece = 8;
  uint4 bits;
  float scale;
  __device__ void load(const BlockWeight& a, const uint8_t* row, int64_t r, int64_t c) {
    bits = load_stream(row + c * 16);
    scale = block_scale(a, r, c * 16, kE4m3Fp16Shift);
  }
  __device__ void unpack(int p, float (&v)[8]) const {
    const uint32_t words[4] = {bits.x, bits.y, bits.z, bits.w};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t w = words[2 * p + h];
      const float2 even = fp16_pair_to_float2(e4m3_pair_02(w)), odd = fp16_pair_to_float2(e4m3_pair_13(w));
      v[4 * h] = even.x * scale, v[4 * h + 1] = odd.x * scale;
      v[4 * h + 2] = even.y * scale, v[4 * h + 3] = odd.y * scale;
    }
  }
};
template <>
struct Chunk<Fp8, 1> {
  static constexpr int kPiece = 1;
  uint32_t bits;
  float scale;
  __device__ void load(const BlockWeight& a, const uint8_t* row, int64_t r, int64_t c) {
    bits = __ldg(row + c);
    scale = block_scale(a, r, c, kE4m3Fp16Shift);
  }
  __device__ void unpack(int, float (&v)[1]) const { v[0] = fp16_pair_to_float2(e4m3_pair_02(bits)).x * scale; }
};
// 32 e2m1, one scale group: word i holds elements 8i .. 8i+7 (nibble j: element 8i + j).
template <>
struct Chunk<Fp4, 32> {
  static constexpr int kPiece = 8;
  uint4 bits;
  float scale;
  __device__ void load(const BlockWeight& a, const uint8_t* row, int64_t r, int64_t c) {
    bits = load_stream(row + c * 16);
    scale = block_scale(a, min(r, a.out - 1), c * 32, kE2m1Fp16Shift);
  }
  __device__ void unpack(int p, float (&v)[8]) const {
    const uint32_t words[4] = {bits.x, bits.y, bits.z, bits.w};
    const uint32_t w = words[p];
    const float2 p0 = fp16_pair_to_float2(e2m1_pair<0>(w)), p1 = fp16_pair_to_float2(e2m1_pair<1>(w));
    const float2 p2 = fp16_pair_to_float2(e2m1_pair<2>(w)), p3 = fp16_pair_to_float2(e2m1_pair<3>(w));
    v[0] = p0.x * scale, v[1] = p1.x * scale, v[2] = p2.x * scale, v[3] = p3.x * scale;
    v[4] = p0.y * scale, v[5] = p1.y * scale, v[6] = p2.y * scale, v[7] = p3.y * scale;
  }
};
template <>
struct Chunk<Fp4, 1> {
  static constexpr int kPiece = 1;
  uint32_t bits;  // the element's nibble in bits 0-3
  float scale;
  __device__ void load(const BlockWeight& a, const uint8_t* row, int64_t r, int64_t c) {
    bits = uint32_t{__ldg(row + c / 2)} >> (c % 2 * 4);  // low nibble first
    scale = block_scale(a, min(r, a.out - 1), c, kE2m1Fp16Shift);
  }
  __device__ void unpack(int, float (&v)[1]) const { v[0] = fp16_pair_to_float2(e2m1_pair<0>(bits)).x * scale; }
};

// y[t, o] for the warp's R rows (o = row0 ..; all in one group) over its part of `in`: lane l
// takes chunks part_begin + l, + 32, ... of V elements; rows past the end read the last row again
// and are not written.
template <class W, int V, int R, int P, int NT>
__global__ void __launch_bounds__(kLinearWarps * 32, 2) linear_kernel(LinearArgs a) {
  follow_previous_kernel();
  constexpr int kGroups = kLinearWarps / P;  // row groups per block
  constexpr int M = R * NT;                  // sums per warp: acc[r * NT + t]
  static_assert(M <= 32 && (M & (M - 1)) == 0, "a warp's sums must be a power of two <= 32");
  __shared__ float partial[P > 1 ? kLinearWarps : 1][M];
  int s = 0;
  while (blockIdx.x >= a.first_block[s + 1]) ++s;
  const int64_t out = a.out[s], block = blockIdx.x - a.first_block[s];
  const BlockWeight bw{a.scales[s], out, a.scale_cols, a.row_shift, a.col_shift};
  float* const y = a.y[s];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, part = warp % P;
  const int64_t row0 = (block * kGroups + warp / P) * R;
  const bool live = row0 < out;
  using C = Chunk<W, V>;
  // Steps of loads in flight: kUnroll, but one for 8 tokens of FP8 / FP4, whose decoded pieces
  // would not fit the registers beside two steps' loads and 32 sums (the loads of 16 warps a
  // multiprocessor still keep 32 KB in flight, and 8 tokens of these types are bound by the fp32
  // FMAs, not by memory).
  constexpr bool kQuantized = std::is_same_v<W, Fp8> || std::is_same_v<W, Fp4>;
  constexpr int U = kQuantized && NT == kTokens ? 1 : kUnroll;
  const uint8_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = static_cast<const uint8_t*>(a.w[s]) + min(row0 + r, out - 1) * a.row_bytes;
  const float* x = a.x + (live ? row0 / a.group_rows[s] : 0) * a.in;
  // The warp's part of the row in chunks of V: a multiple of 32 chunks (the last part may be short).
  const int64_t chunks = a.in / V, per = (chunks + 32 * P - 1) / (32 * P) * 32;
  const int64_t begin = live ? part * per : chunks, end = begin + per < chunks ? begin + per : chunks;
  for (int t0 = 0; t0 < a.n; t0 += NT) {
    const int nt = a.n - t0 < NT ? a.n - t0 : NT;
    const float* xt = x + t0 * a.ldx;
    float acc[M] = {};
    for (int64_t c = begin + lane; c < end; c += 32 * U) {
      C wc[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (c + 32 * u < end) wc[u][r].load(bw, rows[r], row0 + r, c + 32 * u);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (c + 32 * u >= end) break;
#pragma unroll
        for (int p = 0; p < V / C::kPiece; ++p) {
          const int64_t k = (c + 32 * u) * V + p * C::kPiece;
          float wv[R][C::kPiece];
#pragma unroll
          for (int r = 0; r < R; ++r) wc[u][r].unpack(p, wv[r]);
#pragma unroll
          for (int t = 0; t < NT; ++t) {
            if (t >= nt) break;
            float xv[C::kPiece];
            load(xt + t * a.ldx + k, xv);
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
              for (int v = 0; v < C::kPiece; ++v) acc[r * NT + t] = fmaf(wv[r][v], xv[v], acc[r * NT + t]);
          }
        }
      }
    }
    // Lane l holds the warp's sum i = l / (32 / M), i.e. row row0 + i / NT, token t0 + i % NT.
    const float sum = reduce_scatter<M>(acc, lane);
    const int i = lane / (32 / M);
    const bool first = lane % (32 / M) == 0;
    if constexpr (P == 1) {
      const int64_t row = row0 + i / NT;
      if (first && live && i % NT < nt && row < out) y[(t0 + i % NT) * a.ldy[s] + row] = sum;
    } else {
      __syncthreads();  // the previous pass has read `partial`
      if (first) partial[warp][i] = sum;
      __syncthreads();
      // Thread g * M + i adds sum i of row group g over the parts in order.
      if (threadIdx.x < kGroups * M) {
        const int g = threadIdx.x / M, j = threadIdx.x % M;
        float total = partial[g * P][j];
#pragma unroll
        for (int p = 1; p < P; ++p) total += partial[g * P + p][j];
        const int64_t row = (block * kGroups + g) * R + j / NT;
        if (j % NT < nt && row < out) y[(t0 + j % NT) * a.ldy[s] + row] = total;
      }
    }
  }
}

// Sets a.first_block for R rows a warp and kLinearWarps / P row groups a block.
template <class W, int V, int R, int P, int NT>
cudaError_t launch_linear(LinearArgs a, cudaStream_t stream) {
  constexpr int64_t rows_per_block = int64_t{kLinearWarps / P} * R;
  int64_t blocks = 0;
  for (int s = 0; s < a.outputs; ++s) {
    a.first_block[s] = static_cast<unsigned>(blocks);
    blocks += (a.out[s] + rows_per_block - 1) / rows_per_block;
  }
  for (int s = a.outputs; s <= kMaxLinearOutputs; ++s) a.first_block[s] = static_cast<unsigned>(blocks);
  return launch_dependent(linear_kernel<W, V, R, P, NT>, dim3(static_cast<unsigned>(blocks)), dim3(kLinearWarps * 32),
                          0, stream, a);
}

// Tokens per pass: the power of two that holds min(n, 8); Single: n is 1.
template <class W, int V, int R, int P, bool Single>
cudaError_t launch_tokens(const LinearArgs& a, cudaStream_t stream) {
  if constexpr (Single) {
    return launch_linear<W, V, R, P, 1>(a, stream);
  } else {
    if (a.n == 1) return launch_linear<W, V, R, P, 1>(a, stream);
    if (a.n == 2) return launch_linear<W, V, R, P, 2>(a, stream);
    if (a.n <= 4) return launch_linear<W, V, R, P, 4>(a, stream);
    return launch_linear<W, V, R, P, kTokens>(a, stream);
  }
}

// The 16-byte path with R rows a warp. Parts per row double while the grid has fewer than
// kTargetWarps warps (a small `out`: 1024 rows of 4096 take 8 parts, 2048 warps, each lane's 8
// loads of the matrix in flight at once) and every part keeps at least kUnroll full steps of 32
// chunks.
template <class W, int V, int R, bool Single>
cudaError_t launch_rows(const LinearArgs& a, cudaStream_t stream) {
  int64_t warps = 0;
  for (int s = 0; s < a.outputs; ++s) warps += (a.out[s] + R - 1) / R;
  const int64_t chunks = a.in / V;
  int parts = 1;
  while (parts < kLinearWarps && warps * parts < kTargetWarps && chunks >= 2 * parts * 32 * kUnroll) parts *= 2;
  switch (parts) {
    case 1:
      return launch_tokens<W, V, R, 1, Single>(a, stream);
    case 2:
      return launch_tokens<W, V, R, 2, Single>(a, stream);
    case 4:
      return launch_tokens<W, V, R, 4, Single>(a, stream);
    default:
      return launch_tokens<W, V, R, kLinearWarps, Single>(a, stream);
  }
}

// kRows rows a warp share each activation load, which pays from two tokens on. One token of bf16
// weights takes half as many rows a warp: twice the warps, each with a shorter chain of loads
// (H200: 8192 x 4096 in 18.9 instead of 20.0 us, 4096 x 4096 in 10.4 instead of 12.0;
// bench/results/decode-h200-2026-12-01-s10/). FP8 / FP4 decode more per load and do not gain.
template <class W, int V>
cudaError_t launch_vector(const LinearArgs& a, cudaStream_t stream) {
  if constexpr (std::is_same_v<W, uint16_t>)
    if (a.n == 1) return launch_rows<W, V, kRows / 2, true>(a, stream);
  return launch_rows<W, V, kRows, false>(a, stream);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Blocks for a grid-stride loop over `count` elements.
unsigned grid_for(int64_t count) {
  return static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 8192));
}

// 1 / RMS of a row of `width` values, every thread of the block gets it (cpu::rms_norm's order:
// the sum of squares, then mean + eps).
__device__ float row_inv_rms(const float* r, int width, float eps, float* red) {
  float sq = 0.0f;
  for (int i = threadIdx.x; i < width; i += blockDim.x) sq = fmaf(r[i], r[i], sq);
  return 1.0f / sqrtf(block_sum(sq, red) / static_cast<float>(width) + eps);
}

// One block per row: the sum of squares, then x * inv (* weight), in the reference's order.
__global__ void __launch_bounds__(kNormThreads) rms_norm_kernel(float* x, int width, const float* weight, float eps) {
  follow_previous_kernel();
  __shared__ float red[32];
  float* r = x + int64_t{blockIdx.x} * width;
  const float inv = row_inv_rms(r, width, eps, red);
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    float v = r[i] * inv;
    if (weight) v *= weight[i];
    r[i] = v;
  }
}

// One block per head row (token t = row / heads): rms_norm_kernel's normalisation, with the last
// 2 * pairs values kept in shared memory, then rotated in pairs (rope_kernel's math) and stored.
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_rope_kernel(float* x, int heads, int dim, const float* weight, float eps, const float* inv_freq, int pairs,
                         const int64_t* first_position) {
  follow_previous_kernel();
  __shared__ float red[32];
  __shared__ float rotated[2 * kMaxRopePairs];
  float* r = x + int64_t{blockIdx.x} * dim;
  const int first_rotated = dim - 2 * pairs;
  const float inv = row_inv_rms(r, dim, eps, red);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = r[i] * inv;
    if (weight) v *= weight[i];
    if (i < first_rotated)
      r[i] = v;
    else
      rotated[i - first_rotated] = v;
  }
  __syncthreads();
  const int64_t position = *first_position + blockIdx.x / heads;
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    float a = rotated[2 * i], b = rotated[2 * i + 1];
    rotate_pair(a, b, inv_freq[i], position, false);
    r[first_rotated + 2 * i] = a;
    r[first_rotated + 2 * i + 1] = b;
  }
}

// One thread per rotated pair (token, head, pair).
__global__ void rope_kernel(float* x, int n, int heads, int dim, const float* inv_freq, int pairs,
                            const int64_t* first_position_at, int64_t stride, bool inverse) {
  follow_previous_kernel();
  const int64_t first = *first_position_at / stride;
  const int64_t count = int64_t{n} * heads * pairs;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < count;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int i = static_cast<int>(idx % pairs);
    const int64_t head = idx / pairs;  // t * heads + h
    const int64_t t = head / heads;
    float* r = x + head * dim + dim - 2 * pairs;
    rotate_pair(r[2 * i], r[2 * i + 1], inv_freq[i], (first + t) * stride, inverse);
  }
}

__global__ void scale_kernel(float* x, int64_t count, float s) {
  follow_previous_kernel();
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    x[i] *= s;
}

// One thread per (token, d): reads the embedding value once, writes it to all N streams.
__global__ void embed_streams_kernel(const int32_t* ids, int n, const float* table, int D, int N, float* streams) {
  follow_previous_kernel();
  const int64_t count = int64_t{n} * D;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / D, d = i % D;
    const float v = table[int64_t{ids[t]} * D + d];
    float* s = streams + t * N * D + d;
    for (int j = 0; j < N; ++j) s[int64_t{j} * D] = v;
  }
}

// Completes `a` (its outputs, x and n set) for weights of type wt, checks what every launch of
// linear_kernel needs, then launches the 16-byte path when every weight row, activation row and
// group slice start 16-byte aligned and a warp's 4 rows share a group; otherwise one row a warp,
// one element a lane.
cudaError_t launch_outputs(LinearArgs& a, WeightType wt, cudaStream_t stream) {
  if (wt != WeightType::F32 && wt != WeightType::BF16 && !is_quantized(wt)) return cudaErrorInvalidValue;
  if (wt == WeightType::Fp4 && a.in % 32 != 0) return cudaErrorInvalidValue;
  a.row_bytes = weight_value_bytes(wt, 1, a.in);
  const int block = fp8_block(wt);
  if (is_quantized(wt)) {
    a.row_shift = block == 128 ? 7 : block == 32 ? 5 : 0;
    a.col_shift = block == 128 ? 7 : 5;
    a.scale_cols = block ? (a.in + block - 1) / block : a.in / 32;
  }
  int64_t blocks = 0;  // at most, with one row a warp
  bool vec = aligned16(a.x) && a.row_bytes % 16 == 0 && a.ldx % 4 == 0;
  for (int s = 0; s < a.outputs; ++s) {
    blocks += (a.out[s] + kLinearWarps - 1) / kLinearWarps;
    if (is_quantized(wt)) a.scales[s] = static_cast<const uint8_t*>(a.w[s]) + weight_scale_offset(wt, a.out[s], a.in);
    vec = vec && aligned16(a.w[s]) && (a.group_rows[s] == a.out[s] || a.group_rows[s] % kRows == 0);
  }
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  switch (wt) {
    case WeightType::F32:
      return vec ? launch_vector<float, 4>(a, stream) : launch_linear<float, 1, 1, 1, kTokens>(a, stream);
    case WeightType::BF16:
      return vec ? launch_vector<uint16_t, 8>(a, stream) : launch_linear<uint16_t, 1, 1, 1, kTokens>(a, stream);
    case WeightType::Fp4:
      return vec ? launch_vector<Fp4, 32>(a, stream) : launch_linear<Fp4, 1, 1, 1, kTokens>(a, stream);
    default:
      return vec ? launch_vector<Fp8, 16>(a, stream) : launch_linear<Fp8, 1, 1, 1, kTokens>(a, stream);
  }
}

}  // namespace

cudaError_t linear_grouped(const float* x, int64_t ldx, int n, const void* w, WeightType wt, int groups, int64_t rows,
                           int64_t in, float* y, int64_t ldy, cudaStream_t stream) {
  if (!x || !w || !y || n < 0 || groups < 1 || rows < 1 || in < 1 || ldx < groups * in || ldy < groups * rows)
    return cudaErrorInvalidValue;
  LinearArgs a{x, ldx, n, in, 0, 0, 0, 0, 1, {w}, {}, {groups * rows}, {rows}, {y}, {ldy}, {}};
  return launch_outputs(a, wt, stream);
}

cudaError_t linear(const float* x, int64_t ldx, int n, const void* w, WeightType wt, int64_t out, int64_t in, float* y,
                   int64_t ldy, cudaStream_t stream) {
  return linear_grouped(x, ldx, n, w, wt, 1, out, in, y, ldy, stream);
}

cudaError_t linears(const float* x, int64_t ldx, int n, int64_t in, WeightType wt, const LinearOutput* outputs,
                    int count, cudaStream_t stream) {
  if (!x || !outputs || n < 0 || in < 1 || ldx < in || count < 1 || count > kMaxLinearOutputs)
    return cudaErrorInvalidValue;
  LinearArgs a{x, ldx, n, in, 0, 0, 0, 0, count, {}, {}, {}, {}, {}, {}, {}};
  for (int s = 0; s < count; ++s) {
    const LinearOutput& o = outputs[s];
    if (!o.w || !o.y || o.out < 1 || o.ldy < o.out) return cudaErrorInvalidValue;
    a.w[s] = o.w, a.out[s] = o.out, a.group_rows[s] = o.out, a.y[s] = o.y, a.ldy[s] = o.ldy;
  }
  return launch_outputs(a, wt, stream);
}

cudaError_t rms_norm(float* x, int64_t rows, int width, const float* weight, float eps, cudaStream_t stream) {
  if (!x || rows < 0 || rows > 0x7fffffff || width < 1) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (const cudaError_t e = launch_dependent(rms_norm_kernel, dim3(static_cast<unsigned>(rows)), dim3(kNormThreads), 0,
                                             stream, x, width, weight, eps))
    return e;
  return cudaGetLastError();
}

cudaError_t rope(float* x, int n, int heads, int dim, const float* inv_freq, int pairs, const int64_t* first_position,
                 bool inverse, cudaStream_t stream, int64_t stride) {
  if (!x || !inv_freq || !first_position || n < 0 || heads < 1 || pairs < 1 || dim < 2 * pairs || stride < 1)
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (const cudaError_t e = launch_dependent(rope_kernel, dim3(grid_for(int64_t{n} * heads * pairs)), dim3(kThreads), 0,
                                             stream, x, n, heads, dim, inv_freq, pairs, first_position, stride, inverse))
    return e;
  return cudaGetLastError();
}

cudaError_t rms_norm_rope(float* x, int n, int heads, int dim, const float* weight, float eps, const float* inv_freq,
                          int pairs, const int64_t* first_position, cudaStream_t stream) {
  if (!x || !inv_freq || !first_position || n < 0 || heads < 1 || pairs < 1 || pairs > kMaxRopePairs ||
      dim < 2 * pairs || int64_t{n} * heads > 0x7fffffff)
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return launch_dependent(rms_norm_rope_kernel, dim3(static_cast<unsigned>(n * heads)), dim3(kNormThreads), 0, stream,
                          x, heads, dim, weight, eps, inv_freq, pairs, first_position);
}

cudaError_t scale(float* x, int64_t count, float s, cudaStream_t stream) {
  if (!x || count < 0) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (const cudaError_t e =
          launch_dependent(scale_kernel, dim3(grid_for(count)), dim3(kThreads), 0, stream, x, count, s))
    return e;
  return cudaGetLastError();
}

cudaError_t embed_streams(const int32_t* ids, int n, const float* table, int D, int N, float* streams,
                          cudaStream_t stream) {
  if (!ids || !table || !streams || n < 0 || D < 1 || N < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (const cudaError_t e = launch_dependent(embed_streams_kernel, dim3(grid_for(int64_t{n} * D)), dim3(kThreads), 0,
                                             stream, ids, n, table, D, N, streams))
    return e;
  return cudaGetLastError();
}

}  // namespace frank::cuda
