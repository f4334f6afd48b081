// MoE experts (ops.cuh: moe_experts; reference engine::moe_forward), in two kernels over groups of
// up to kGroup tokens:
//   gate_up: hidden[t][s][r] = silu(min(gate_e[r]·x_t, limit)) * clamp(up_e[r]·x_t, -limit, limit)
//            for every routed slot s < k (e = experts[t*k + s]) and the shared expert (s = k, e = E);
//   down:    out[t][d] = sum_s weights[t*k + s] * (down_e[d]·hidden[t][s]) + down_E[d]·hidden[t][k].
// A block first builds the group's plan: its distinct experts in order of first choice and, for
// each, the slots that chose it. A warp then reads each weight row once and takes its dot product
// with the vectors of all those slots (<= kGroup at a time, partial sums in registers), so at
// decode (n <= 8) every expert's weights are read once per step. Expert ids outside [0, E) (a
// token with fewer selectable experts than k gets -1 from route) are skipped.
//
// A faster design: one pass that sorts all n*k slots by expert (a histogram and scan), so larger n
// reads each expert once too and blocks are spread over the experts actually used instead of
// over (group, distinct expert) pairs; for prefill, tensor-core tiles (mma / wgmma) over each
// expert's tokens; and FP4/FP8 expert weights read directly.
#include <algorithm>

#include "frank/cuda/ops.cuh"

namespace frank::cuda {
namespace {

constexpr int kGroup = 8;                  // tokens whose weight reads are shared
constexpr int kMaxK = 16;                  // routed experts per token
constexpr int kMaxSlots = kGroup * kMaxK;  // routed slots of a group
constexpr int kWarps = 8;                  // a warp per output row
constexpr int kThreads = 32 * kWarps;
static_assert(kThreads >= kMaxSlots, "build_plan gives each slot a thread");

using bf16 = uint16_t;  // raw bfloat16 bits: the high half of an fp32

struct Plan {
  int count;                 // distinct valid experts in the group
  int expert[kMaxSlots];     // by distinct index, in order of first choice
  int begin[kMaxSlots + 1];  // distinct expert u's slots: member[begin[u] .. begin[u+1])
  int member[kMaxSlots];     // group slots j = (token - first token of the group) * k + s
  int id[kMaxSlots];         // scratch: each slot's expert (-1: invalid)
  int first[kMaxSlots];      // scratch: the first slot with the same expert (-1: invalid)
};

// Every thread of the block calls it. Slot j's place in member[] is the number of valid slots
// whose first slot is earlier, plus those with the same first slot that come before j.
__device__ void build_plan(Plan& p, const int32_t* __restrict__ experts, int n, int k, int E, int group) {
  const int j = threadIdx.x;
  const int slots = min(kGroup, n - group * kGroup) * k;
  int e = -1;
  if (j < slots) {
    e = experts[static_cast<size_t>(group) * kGroup * k + j];
    if (e < 0 || e >= E) e = -1;
  }
  if (j < kMaxSlots) p.id[j] = e;
  __syncthreads();
  int first = -1;
  if (e >= 0)
    for (int i = 0; i <= j; ++i)
      if (p.id[i] == e) {
        first = i;
        break;
      }
  if (j < kMaxSlots) p.first[j] = first;
  const int valid = __syncthreads_count(e >= 0);
  const bool owner = e >= 0 && first == j;
  const int count = __syncthreads_count(owner);
  if (e >= 0) {
    int pos = 0, u = 0;
    for (int i = 0; i < slots; ++i) {
      const int f = p.first[i];
      pos += f >= 0 && (f < first || (f == first && i < j));
      u += f == i && i < j;
    }
    p.member[pos] = j;
    if (owner) p.expert[u] = e, p.begin[u] = pos;
  }
  if (j == 0) p.count = count, p.begin[count] = valid;
  __syncthreads();
}

// 16-byte loads: V weights of type T, or V activations (fp32).
template <class T>
constexpr int kVec = 16 / sizeof(T);

__device__ void load_vec(const float* p, float* v) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p));
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
}
__device__ void load_vec(const bf16* p, float* v) {
  const uint4 a = __ldg(reinterpret_cast<const uint4*>(p));
  const uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
  for (int i = 0; i < 4; ++i)
    v[2 * i] = __uint_as_float(w[i] << 16), v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
}
__device__ float load_one(const float* p) { return __ldg(p); }
__device__ float load_one(const bf16* p) { return __uint_as_float(static_cast<uint32_t>(__ldg(p)) << 16); }

__device__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// acc[r][c] = w[r] · xs[c] over len values for R weight rows and cnt <= kGroup vectors, summed over
// the warp (every lane gets the sums). vec: len % kVec<T> == 0 and every row 16-byte aligned.
template <class T, int R>
__device__ void warp_dots(const T* const* w, const float* const* xs, int cnt, int len, bool vec,
                          float (&acc)[R][kGroup]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < kGroup; ++c) acc[r][c] = 0.0f;
  if (vec) {
    constexpr int V = kVec<T>;
#pragma unroll 2
    for (int i = lane * V; i < len; i += 32 * V) {
      float wv[R][V];
#pragma unroll
      for (int r = 0; r < R; ++r) load_vec(w[r] + i, wv[r]);
#pragma unroll
      for (int c = 0; c < kGroup; ++c) {
        if (c >= cnt) break;
        float xv[V];
#pragma unroll
        for (int q = 0; q < V; q += 4) load_vec(xs[c] + i + q, xv + q);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int q = 0; q < V; ++q) acc[r][c] = fmaf(wv[r][q], xv[q], acc[r][c]);
      }
    }
  } else {
    for (int i = lane; i < len; i += 32) {
      float wv[R];
#pragma unroll
      for (int r = 0; r < R; ++r) wv[r] = load_one(w[r] + i);
#pragma unroll
      for (int c = 0; c < kGroup; ++c) {
        if (c >= cnt) break;
        const float xv = __ldg(xs[c] + i);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r][c] = fmaf(wv[r], xv, acc[r][c]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < kGroup; ++c)
      if (c < cnt)
        for (int offset = 16; offset > 0; offset /= 2) acc[r][c] += __shfl_xor_sync(0xffffffffu, acc[r][c], offset);
}

// The slots one warp serves with one weight row: the shared expert's (every token of the group,
// slot k) when u < 0, else distinct expert u's members.
struct Slots {
  int begin, count;
  __device__ Slots(const Plan& p, int u, int tokens) {
    begin = u < 0 ? 0 : p.begin[u];
    count = u < 0 ? tokens : p.begin[u + 1] - p.begin[u];
  }
  // Token (within the group) and slot of entry i; routed entries index the plan's member list.
  __device__ int token(const Plan& p, int u, int i, int k) const { return u < 0 ? i : p.member[begin + i] / k; }
  __device__ int slot(const Plan& p, int u, int i, int k) const { return u < 0 ? k : p.member[begin + i] % k; }
};

// grid (rows of I / kWarps, groups, 1 + distinct experts bound): z = 0 is the shared expert.
template <class T>
__global__ void __launch_bounds__(kThreads)
    gate_up_kernel(const float* __restrict__ x, int n, int D, int I, const int32_t* __restrict__ experts, int k, int E,
                   const void* const* gate, const void* const* up, float limit, float* __restrict__ hidden) {
  __shared__ Plan p;
  const int group = blockIdx.y, u = static_cast<int>(blockIdx.z) - 1;
  if (u >= 0) {
    build_plan(p, experts, n, k, E, group);
    if (u >= p.count) return;
  }
  const int r = blockIdx.x * kWarps + threadIdx.x / 32;
  if (r >= I) return;
  const int e = u < 0 ? E : p.expert[u];
  const T* gate_e = static_cast<const T*>(gate[e]);
  const T* up_e = static_cast<const T*>(up[e]);
  const bool vec = D % kVec<T> == 0 && aligned16(gate_e) && aligned16(up_e) && aligned16(x);
  const T* const rows[2] = {gate_e + static_cast<size_t>(r) * D, up_e + static_cast<size_t>(r) * D};
  const int tokens = min(kGroup, n - group * kGroup);
  const Slots slots(p, u, tokens);
  for (int i0 = 0; i0 < slots.count; i0 += kGroup) {
    const int cnt = min(kGroup, slots.count - i0);
    const float* xs[kGroup];
#pragma unroll
    for (int c = 0; c < kGroup; ++c)
      xs[c] = x + static_cast<size_t>(group * kGroup + (c < cnt ? slots.token(p, u, i0 + c, k) : 0)) * D;
    float acc[2][kGroup];
    warp_dots<T, 2>(rows, xs, cnt, D, vec, acc);
#pragma unroll
    for (int c = 0; c < kGroup; ++c) {
      if (c >= cnt || c != threadIdx.x % 32) continue;  // lane c stores entry c
      // std::min and std::clamp's comparisons (a NaN passes through, as in the reference).
      const float g = acc[0][c], up_v = acc[1][c];
      const float gv = limit < g ? limit : g, uv = up_v < -limit ? -limit : limit < up_v ? limit : up_v;
      const size_t t = group * kGroup + slots.token(p, u, i0 + c, k);
      hidden[(t * (k + 1) + slots.slot(p, u, i0 + c, k)) * I + r] = gv * (1.0f / (1.0f + expf(-gv))) * uv;
    }
  }
}

// grid (rows of D / kWarps, groups). Lane c accumulates the output of the group's token c.
template <class T>
__global__ void __launch_bounds__(kThreads)
    down_kernel(const float* __restrict__ hidden, int n, int D, int I, const int32_t* __restrict__ experts,
                const float* __restrict__ weights, int k, int E, const void* const* down, float* __restrict__ out) {
  __shared__ Plan p;
  const int group = blockIdx.y;
  build_plan(p, experts, n, k, E, group);
  const int d = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (d >= D) return;
  const int tokens = min(kGroup, n - group * kGroup);
  const float* h = hidden + static_cast<size_t>(group) * kGroup * (k + 1) * I;  // the group's first token
  float sum = 0.0f;
  // The routed experts in order of first choice, then the shared one (u = -1) as the reference adds it last.
  for (int step = 0; step <= p.count; ++step) {
    const int u = step < p.count ? step : -1;
    const T* w = static_cast<const T*>(down[u < 0 ? E : p.expert[u]]);
    const bool vec = I % kVec<T> == 0 && aligned16(w) && aligned16(hidden);
    const T* const rows[1] = {w + static_cast<size_t>(d) * I};
    const Slots slots(p, u, tokens);
    for (int i0 = 0; i0 < slots.count; i0 += kGroup) {
      const int cnt = min(kGroup, slots.count - i0);
      const float* xs[kGroup];
#pragma unroll
      for (int c = 0; c < kGroup; ++c) {
        const int i = c < cnt ? i0 + c : i0;
        xs[c] = h + (static_cast<size_t>(slots.token(p, u, i, k)) * (k + 1) + slots.slot(p, u, i, k)) * I;
      }
      float acc[1][kGroup];
      warp_dots<T, 1>(rows, xs, cnt, I, vec, acc);
#pragma unroll
      for (int c = 0; c < kGroup; ++c) {
        if (c >= cnt || slots.token(p, u, i0 + c, k) != lane) continue;
        const float scale =
            u < 0 ? 1.0f : weights[static_cast<size_t>(group) * kGroup * k + p.member[slots.begin + i0 + c]];
        sum += acc[0][c] * scale;
      }
    }
  }
  if (lane < tokens) out[(static_cast<size_t>(group) * kGroup + lane) * D + d] = sum;
}

template <class T>
cudaError_t launch(const float* x, int n, int D, int I, const int32_t* experts, const float* weights, int k, int E,
                   const ExpertTables& tables, float limit, float* hidden, float* out, cudaStream_t stream) {
  const int groups = (n + kGroup - 1) / kGroup;
  const dim3 gate_up_grid((I + kWarps - 1) / kWarps, groups, 1 + std::min(n, kGroup) * k);
  gate_up_kernel<T>
      <<<gate_up_grid, kThreads, 0, stream>>>(x, n, D, I, experts, k, E, tables.gate, tables.up, limit, hidden);
  if (const cudaError_t e = cudaGetLastError()) return e;
  const dim3 down_grid((D + kWarps - 1) / kWarps, groups);
  down_kernel<T><<<down_grid, kThreads, 0, stream>>>(hidden, n, D, I, experts, weights, k, E, tables.down, out);
  return cudaGetLastError();
}

}  // namespace

cudaError_t moe_experts(const float* x, int n, int D, int I, const int32_t* experts, const float* weights, int k, int E,
                        const ExpertTables& tables, float limit, float* hidden, float* out, cudaStream_t stream) {
  if (n < 0 || D < 1 || I < 1 || k < 1 || k > kMaxK || E < 1 || !(limit > 0.0f)) return cudaErrorInvalidValue;
  if ((n + kGroup - 1) / kGroup > 65535) return cudaErrorInvalidValue;  // grid.y
  if (!x || !experts || !weights || !hidden || !out || !tables.gate || !tables.up || !tables.down)
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  switch (tables.type) {
    case WeightType::F32:
      return launch<float>(x, n, D, I, experts, weights, k, E, tables, limit, hidden, out, stream);
    case WeightType::BF16:
      return launch<bf16>(x, n, D, I, experts, weights, k, E, tables, limit, hidden, out, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace frank::cuda
