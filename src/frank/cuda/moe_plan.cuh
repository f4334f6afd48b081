#pragma once
// The parts of the MoE expert kernels (moe.cu): a group's plan (which experts, which tokens, which
// rows of `hidden`), weight loads (fp32, bf16, and FP8 / FP4 as shipped, decoded where used) and
// activation loads, and the warp's sums of several values at once.
#include <cstdint>
#include <type_traits>

#include "frank/cuda/fp8_fp4_decode.h"

namespace frank::cuda::moe {

constexpr int kGroup = 8;                   // tokens whose weight reads are shared
constexpr int kMaxK = 16;                   // routed experts per token
constexpr int kMaxSlots = kGroup * kMaxK;   // routed slots of a group
constexpr int kMaxExperts = kMaxSlots + 1;  // distinct experts of a group, the shared one included
constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
static_assert(kThreads >= kMaxExperts, "build_plan gives each slot and each expert a thread");

using bf16 = uint16_t;  // raw bfloat16 bits: the high half of an fp32

// A group's experts u < count: the distinct valid routed ones in order of first choice, then the
// shared one (every token of the group) when the pass has it. Pairs (u, t), ordered by u then
// token, are the rows of the group's part of `hidden`: u's tokens take rows base[u] ... in token
// order. A token takes at most k routed experts and the shared one, so the group's tokens * (k + 1)
// rows suffice. A pass of the shared expert alone has k = 0: no slot, the shared one is u = 0.
struct Plan {
  int count;
  const void* w[2][kMaxExperts];      // the kernel's matrices (gate, up or down) of each
  int misaligned;                     // some matrix does not start 16-byte aligned
  uint32_t mask[kMaxExperts];         // bit t: token t of the group chose it
  int base[kMaxExperts];              // its first row of hidden
  float weight[kMaxExperts][kGroup];  // routing weight of (u, t): the sum over t's slots that chose u
  int id[kMaxSlots];                  // scratch: each slot's expert (-1: invalid)
  float slot_weight[kMaxSlots];       // scratch
  int distinct[kMaxSlots];            // scratch: a first slot's index u
  int owners[kMaxSlots / 32];         // scratch: first slots per warp
};

__device__ inline int hidden_row(const Plan& p, int u, int t) {
  return p.base[u] + __popc(p.mask[u] & ((1u << t) - 1));
}

__device__ inline void set_expert(Plan& p, int u, int e, const void* const* m0, const void* const* m1) {
  p.w[0][u] = m0[e];
  p.w[1][u] = m1 ? m1[e] : nullptr;
  if ((reinterpret_cast<uintptr_t>(p.w[0][u]) | reinterpret_cast<uintptr_t>(p.w[1][u])) % 16 != 0)
    atomicOr(&p.misaligned, 1);
}

// Every thread of the block calls it. Expert ids outside [0, E) (route gives -1 to a token with
// fewer selectable experts than k) are skipped. `weights` may be null (down needs none). `shared`:
// the plan ends with the shared expert (table index E).
__device__ inline void build_plan(Plan& p, const int32_t* __restrict__ experts, const float* __restrict__ weights,
                                  int n, int k, int E, bool shared, int group, const void* const* m0,
                                  const void* const* m1) {
  const int j = threadIdx.x, lane = j % 32, warp = j / 32;
  const int tokens = min(kGroup, n - group * kGroup), slots = tokens * k;
  const size_t first_slot = static_cast<size_t>(group) * kGroup * k;
  int e = -1;
  if (j < slots) {
    e = experts[first_slot + j];
    if (e < 0 || e >= E) e = -1;
  }
  if (j < kMaxSlots) p.id[j] = e, p.slot_weight[j] = weights && j < slots ? weights[first_slot + j] : 0.0f;
  if (j < kMaxExperts) p.mask[j] = 0;
  if (j == 0) p.misaligned = 0;
  __syncthreads();
  int first = j;  // the first slot with the same expert
  if (e >= 0)
    for (int i = 0; i < j; ++i)
      if (p.id[i] == e) {
        first = i;
        break;
      }
  const bool owner = e >= 0 && first == j;
  const unsigned owners = __ballot_sync(0xffffffffu, owner);
  if (lane == 0 && warp < kMaxSlots / 32) p.owners[warp] = __popc(owners);
  __syncthreads();
  int count = 0, u = __popc(owners & ((1u << lane) - 1));
  for (int w = 0; w < kMaxSlots / 32; ++w) {
    if (w < warp) u += p.owners[w];
    count += p.owners[w];
  }
  if (owner) p.distinct[j] = u, set_expert(p, u, e, m0, m1);
  if (j == 0 && shared) set_expert(p, count, E, m0, m1), p.mask[count] = (1u << tokens) - 1;
  if (j < kGroup) p.weight[count][j] = 1.0f;
  __syncthreads();
  if (e >= 0) {
    // The token's first slot with this expert sums the token's weights for it, in slot order.
    const int t = j / k;
    bool lead = true;
    float sum = 0.0f;
    for (int s = t * k; s < (t + 1) * k && lead; ++s)
      if (p.id[s] == e) {
        lead = s >= j;
        sum += p.slot_weight[s];
      }
    if (lead) {
      const int d = p.distinct[first];
      p.weight[d][t] = sum;
      atomicOr(&p.mask[d], 1u << t);  // integer bits: the same in any order
    }
  }
  __syncthreads();
  if (warp == 0) {  // base: an exclusive prefix sum of the experts' token counts (mask[count] is 0 without shared)
    int carry = 0;
    for (int u0 = 0; u0 <= count; u0 += 32) {
      const int c = u0 + lane <= count ? __popc(p.mask[u0 + lane]) : 0;
      int sum = c;
      for (int o = 1; o < 32; o *= 2) {
        const int v = __shfl_up_sync(0xffffffffu, sum, o);
        if (lane >= o) sum += v;
      }
      if (u0 + lane <= count) p.base[u0 + lane] = carry + sum - c;
      carry += __shfl_sync(0xffffffffu, sum, 31);
    }
  }
  if (j == 0) p.count = count + (shared ? 1 : 0);
  __syncthreads();
}

// One value of an expert's hidden layer from its gate and up outputs: silu(min(g, limit)) *
// clamp(u, -limit, limit) times the routing weight, as engine::swiglu_expert computes it (silu(v) =
// v * (1 / (1 + exp(-v))); std::min's and std::clamp's comparisons: a NaN passes through).
__device__ __forceinline__ float swiglu(float g, float u, float limit, float weight) {
  const float gv = limit < g ? limit : g, uv = u < -limit ? -limit : limit < u ? limit : u;
  return gv * (1.0f / (1.0f + expf(-gv))) * uv * weight;
}

// V consecutive weights of type T as loaded: 16 bytes (8 bf16 or 4 fp32) or one element.
template <class T, int V>
struct Weights {
  uint32_t word[V == 1 ? 1 : 4];
  // Element q as fp32: bf16 element 2i is the low half of word i (little-endian); a single bf16
  // is kept shifted into place.
  __device__ float at(int q) const {
    if constexpr (V == 8) return __uint_as_float(q % 2 ? word[q / 2] & 0xffff0000u : word[q / 2] << 16);
    return __uint_as_float(word[q]);
  }
};

// Weights row[col .. col + V), zeros when !ok (a predicated load: no memory is read for it). One
// 16-byte load that does not allocate in L1 (each weight is read once; L1 keeps the activations),
// or element loads where the matrix is not 16-byte aligned. Volatile: the loads stay before the
// down kernel's wait for gate_up.
template <class T, int V, bool kAligned>
__device__ Weights<T, V> load_weights(const T* row, int col, bool ok) {
  Weights<T, V> w{};
  const T* p = row + col;
  if constexpr (V == 1) {
    if constexpr (sizeof(T) == 2)
      w.word[0] = ok ? static_cast<uint32_t>(__ldg(p)) << 16 : 0u;
    else
      w.word[0] = ok ? __float_as_uint(__ldg(p)) : 0u;
  } else if constexpr (kAligned) {
    asm volatile(
        "{\n .reg .pred on;\n setp.ne.b32 on, %4, 0;\n"
        " @on ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%5];\n}"
        : "+r"(w.word[0]), "+r"(w.word[1]), "+r"(w.word[2]), "+r"(w.word[3])
        : "r"(static_cast<int>(ok)), "l"(p));
  } else if (ok) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (sizeof(T) == 2)
        w.word[i] = __ldg(p + 2 * i) | static_cast<uint32_t>(__ldg(p + 2 * i + 1)) << 16;
      else
        w.word[i] = __float_as_uint(__ldg(p + i));
    }
  }
  return w;
}

// Where an expert matrix [rows, cols] keeps row r: its values at byte r * row_bytes; a quantised
// one's scale of element (r, c) at byte scale_offset + (r >> row_shift) * scale_cols + (c >> col_shift)
// (weight_format.h: FP8 blocks of B x B, both shifts log2 B; FP4 groups of 32 along a row, 0 and 5).
struct MatrixLayout {
  int64_t row_bytes, scale_offset, scale_cols;
  int row_shift, col_shift;
};

// 16 e4m3 (word i: elements 4i .. 4i+3) or 32 e2m1 (word i: elements 8i .. 8i+7) of one block or
// scale group, with the scale factor (fp8_fp4_decode.h); element q decoded where it is used.
template <>
struct Weights<Fp8, 16> {
  uint32_t word[4];
  float scale;
  __device__ float at(int q) const {
    const uint32_t w = word[q / 4];
    const float2 f = fp16_pair_to_float2(q % 2 == 0 ? e4m3_pair_02(w) : e4m3_pair_13(w));  // bytes 0, 2 / 1, 3
    return (q % 4 < 2 ? f.x : f.y) * scale;
  }
};
template <>
struct Weights<Fp4, 32> {
  uint32_t word[4];
  float scale;
  __device__ float at(int q) const {
    const uint32_t w = word[q / 8];
    uint32_t pair = 0;  // nibbles q % 4 and q % 4 + 4
    switch (q % 4) {
      case 0:
        pair = e2m1_pair<0>(w);
        break;
      case 1:
        pair = e2m1_pair<1>(w);
        break;
      case 2:
        pair = e2m1_pair<2>(w);
        break;
      default:
        pair = e2m1_pair<3>(w);
    }
    const float2 f = fp16_pair_to_float2(pair);
    return (q % 8 < 4 ? f.x : f.y) * scale;
  }
};

// Row r of matrix m, elements [col, col + V), zeros when !ok. Dense types: load_weights; FP8 / FP4
// (16-byte aligned only: their buffers are cudaMalloc'd whole) one 16-byte load and the scale byte.
template <class T, int V, bool kAligned>
__device__ Weights<T, V> load_row(const void* m, const MatrixLayout& l, int r, int col, bool ok) {
  if constexpr (std::is_same_v<T, Fp8> || std::is_same_v<T, Fp4>) {
    static_assert(kAligned && V == (std::is_same_v<T, Fp8> ? 16 : 32), "FP8 / FP4 rows are read 16 bytes at a time");
    const auto* base = static_cast<const uint8_t*>(m);
    const uint8_t* p = base + r * l.row_bytes + col / (std::is_same_v<T, Fp8> ? 1 : 2);
    Weights<T, V> w{};
    asm volatile(
        "{\n .reg .pred on;\n setp.ne.b32 on, %4, 0;\n"
        " @on ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%5];\n}"
        : "+r"(w.word[0]), "+r"(w.word[1]), "+r"(w.word[2]), "+r"(w.word[3])
        : "r"(static_cast<int>(ok)), "l"(p));
    const uint8_t* s = base + l.scale_offset + (r >> l.row_shift) * l.scale_cols + (col >> l.col_shift);
    w.scale = ok ? block_scale_factor(__ldg(s), std::is_same_v<T, Fp8> ? kE4m3Fp16Shift : kE2m1Fp16Shift) : 0.0f;
    return w;
  } else {
    return load_weights<T, V, kAligned>(static_cast<const T*>(m) + static_cast<size_t>(r) * (l.row_bytes / sizeof(T)),
                                        col, ok);
  }
}

// Activations row[col .. col + V) (fp32, 16-byte aligned when V > 1), zeros when !ok.
template <int V>
__device__ void load_activations(const float* row, int col, bool ok, float (&a)[V]) {
  const float* p = row + (ok ? col : 0);
  if constexpr (V == 1) {
    a[0] = __ldg(p);
  } else {
#pragma unroll
    for (int q = 0; q < V; q += 4) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(p + q));
      a[q] = v.x, a[q + 1] = v.y, a[q + 2] = v.z, a[q + 3] = v.w;
    }
  }
#pragma unroll
  for (float& x : a) x = ok ? x : 0.0f;
}

// The sums over the warp's 32 lanes of M values (M a power of two <= 32): lane l gets value l % M's.
// Halving exchanges: at step h the lanes with bit h set keep the upper h values and the others the
// lower, each adding its partner's copy (M - 1 shuffles in all); then butterflies over the lane
// bits left.
template <int H, int M>
__device__ void halve(float (&v)[M], int lane) {
  if constexpr (H >= 1) {
    const bool upper = lane & H;
#pragma unroll
    for (int i = 0; i < H; ++i) {
      const float keep = upper ? v[i + H] : v[i], send = upper ? v[i] : v[i + H];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, H);
    }
    halve<H / 2>(v, lane);
  }
}

template <int M>
__device__ float warp_sums(float (&v)[M]) {
  static_assert(M >= 1 && M <= 32 && (M & (M - 1)) == 0, "M: a power of two <= 32");
  const int lane = threadIdx.x % 32;
  halve<M / 2>(v, lane);
  float s = v[0];
#pragma unroll
  for (int o = M; o < 32; o *= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

}  // namespace frank::cuda::moe
