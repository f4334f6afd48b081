// MoE experts (ops.cuh: moe_experts; reference engine::moe_forward), in two kernels over groups of
// up to kGroup tokens:
//   gate_up: hidden[(u, t)][r] = w_ut * silu(min(gate_u[r]·x_t, limit)) * clamp(up_u[r]·x_t, ±limit)
//            for every expert u of the group and token t that chose it, w_ut its routing weight
//            (1 for the shared expert, which every token takes);
//   down:    out[t][d] = sum over t's pairs (u, t) of down_u[d]·hidden[(u, t)].
// A layer whose shared expert has another type than its routed ones (DeepSeek-V4-Flash ships FP8
// and FP4) runs the two kernels twice: over the routed experts alone, writing out, then over the
// shared expert alone (k = 0), whose down kernel adds its sums to out — the reference's order
// (the routed sum, then the shared expert), each value still written by one thread. One type: one
// pass with both, the shared expert last in every group's plan. moe_shared_expert and
// moe_routed_experts issue the two passes apart, the shared expert's first and storing, so that it
// can run on another stream while the routing is made (CudaOps::moe_forward).
// Each block first builds the group's plan (moe_plan.cuh): its distinct experts, the tokens of each
// and their rows of `hidden` (one per pair, at most n*(k+1)). At decode every weight is then read
// once, and every multiprocessor streams an equal share with many 16-byte loads in flight:
//   - the grid is what fits on the GPU at once (no partial last wave); each block takes a
//     contiguous run of units (a few output rows; for gate_up, of one expert), runs balanced to a
//     unit, and its warps split each unit's reduction 8 ways (gate_up: D, or 4 ways with two
//     units at a time; down: the I of all the group's experts end to end), so that every warp
//     has the same work;
//   - a warp loads all the unit's rows over its slice before the first use (8-16 loads of 16 bytes
//     a lane), weights bypassing L1 so that the activations stay there, and keeps one partial sum
//     per output row and token; a warp exchange sums them over the lanes and the block adds the 8
//     warps' sums in a fixed order (no atomics: every run gives the same bits).
//     For one token of 16-byte dense weights, down instead keeps the next (unit, chunk)'s loads
//     in flight while it multiplies the current one (two register stages, the same sums).
// Both kernels are programmatic dependents of the kernel before them (route, then gate_up): their
// blocks start while it ends; down's first weight loads go out before it waits for `hidden`.
//
// FP8 / FP4 experts (as shipped, weight_format.h) take the same kernels: a 16-byte load is 16 e4m3
// of one block or 32 e2m1 of one scale group, each weight decoded where it is used (moe_plan.cuh).
// Left for later: tensor-core tiles (mma / wgmma) over each expert's tokens for prefill, and
// shapes tuned for the quantised types (D = 4096 is 4 chunks of 32 x 32 e2m1: half of gate_up's
// 8 slices of a unit then have no chunk).
#include <algorithm>
#include <atomic>
#include <type_traits>

#include "frank/cuda/exl3_moe.cuh"
#include "frank/cuda/moe_plan.cuh"
#include "frank/cuda/ops.cuh"
#include "frank/cuda/launch.cuh"

namespace frank::cuda {
namespace {

using namespace moe;

constexpr int kPartFloats = 4096;  // shared memory for the warps' partial sums of a pass (16 KB)
constexpr int kMaxDevices = 64;

// For TC tokens: rows per unit, the warps that share a gate/up unit's reduction (the block's other
// warps take other units), and chunks (of 32*V columns) per load batch, chosen so that a warp has
// 8-16 weight loads of 16 bytes in flight within 128 registers (2 blocks of 256 threads a
// multiprocessor; sm_90a spills nothing in the loads' loops). FP8 / FP4 take one chunk a batch
// and 4 down rows: a load holds 2-4x the weights, and decoding them needs the registers (FP4 with 8
// tokens still spills a few words in down).
template <int TC>
struct Shape {
  static constexpr int gate_rows = TC == 1 ? 4 : 2;               // output rows (a gate and an up row each)
  static constexpr int gate_slices = TC == 2 || TC == 4 ? 4 : 8;  // D = 4096, bf16: 16, 16, 16, 8 loads
  static constexpr int down_rows = TC == 8 ? 4 : 8;               // output rows
  static constexpr int down_chunks = TC == 1 || TC == 8 ? 2 : 1;  // per batch: 8 * 2, 8, 8, 4 * 2 loads
};

// Columns [col, col + V) of a weight row (r) against the activations of TC tokens: acc[r * TC + t].
template <class T, int V, int TC, int R, int M>
__device__ void accumulate(const Weights<T, V> (&w)[R], const float (&a)[V], int t, float (&acc)[M]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int q = 0; q < V; ++q) acc[r * TC + t] = fmaf(w[r].at(q), a[q], acc[r * TC + t]);
}

template <class T>
constexpr bool kQuantized = std::is_same_v<T, Fp8> || std::is_same_v<T, Fp4>;

// A kernel's passes with 16-byte weight loads, or element loads when a matrix is not 16-byte
// aligned; FP8 / FP4 matrices are aligned by contract (ops.cuh) and have only the first.
template <class T, class Passes>
__device__ void run_passes(const Plan& p, const Passes& passes) {
  if constexpr (kQuantized<T>)
    passes(std::true_type{});
  else if (p.misaligned)
    passes(std::false_type{});
  else
    passes(std::true_type{});
}

// grid (blocks per group, groups). Unit = (expert u, output rows r0 .. r0 + R). The warps form
// teams of S; a team takes every (8/S)-th unit of the block's run, and its warp s sums over slice s
// of D's chunks of 32*V columns.
template <class T, int V, int TC>
__global__ void __launch_bounds__(kThreads, 2)
    gate_up_kernel(const float* __restrict__ x, int n, int D, int I, const int32_t* __restrict__ experts,
                   const float* __restrict__ weights, int k, int E, bool shared, const void* const* gate,
                   const void* const* up, MatrixLayout layout, float limit, float* __restrict__ hidden) {
  constexpr int R = Shape<TC>::gate_rows, M = 2 * R * TC, S = Shape<TC>::gate_slices, kTeams = kWarps / S;
  constexpr int kChunks = kQuantized<T> ? 1 : 16 / S, kUnits = kPartFloats / (S * M);
  __shared__ Plan p;
  __shared__ float part[kUnits][S][M];  // [unit of the pass][slice][(2r + up) * TC + t]
  const int group = blockIdx.y, slice = threadIdx.x / 32 % S, team = threadIdx.x / 32 / S, lane = threadIdx.x % 32;
  cudaGridDependencySynchronize();  // the previous kernel (route) has written experts and weights
  build_plan(p, experts, weights, n, k, E, shared, group, gate, up);
  cudaTriggerProgrammaticLaunchCompletion();  // the down kernel may take the multiprocessors we leave
  const int row_units = (I + R - 1) / R, units = p.count * row_units;
  const int begin = static_cast<int>(int64_t{units} * blockIdx.x / gridDim.x);
  const int end = static_cast<int>(int64_t{units} * (blockIdx.x + 1) / gridDim.x);
  const int chunks = (D + 32 * V - 1) / (32 * V), c0 = chunks * slice / S, c1 = chunks * (slice + 1) / S;
  const float* xg = x + static_cast<size_t>(group) * kGroup * D;
  float* hg = hidden + static_cast<size_t>(group) * kGroup * (k + 1) * I;
  // One copy of the loop for 16-byte loads, one for element loads (misaligned matrices).
  const auto passes = [&](auto aligned) {
    for (int pass = begin; pass < end; pass += kUnits) {
      const int pass_units = min(kUnits, end - pass);
      for (int i = team; i < pass_units; i += kTeams) {
        const int u = (pass + i) / row_units, r0 = (pass + i) % row_units * R;
        const void* g = p.w[0][u];
        const void* v = p.w[1][u];
        const uint32_t mask = p.mask[u];
        float acc[M] = {};
        for (int c = c0; c < c1; c += kChunks) {
          Weights<T, V> w[kChunks][2 * R];
          int col[kChunks];
          bool ok[kChunks];
#pragma unroll
          for (int j = 0; j < kChunks; ++j) {
            col[j] = (c + j) * 32 * V + lane * V;
            ok[j] = c + j < c1 && col[j] < D;
#pragma unroll
            for (int r = 0; r < R; ++r) {
              const int row = min(r0 + r, I - 1);  // past I: read again, not kept
              w[j][2 * r] = load_row<T, V, decltype(aligned)::value>(g, layout, row, col[j], ok[j]);
              w[j][2 * r + 1] = load_row<T, V, decltype(aligned)::value>(v, layout, row, col[j], ok[j]);
            }
          }
#pragma unroll
          for (int t = 0; t < TC; ++t) {
            if (!(mask >> t & 1)) continue;
#pragma unroll
            for (int j = 0; j < kChunks; ++j) {
              float a[V];
              load_activations<V>(xg + static_cast<size_t>(t) * D, col[j], ok[j], a);
              accumulate<T, V, TC>(w[j], a, t, acc);
            }
          }
        }
        const float s = warp_sums<M>(acc);
        if (lane < M) part[i][slice][lane] = s;
      }
      __syncthreads();
      for (int idx = threadIdx.x; idx < pass_units * R * TC; idx += kThreads) {
        const int i = idx / (R * TC), r = idx / TC % R, t = idx % TC;
        const int u = (pass + i) / row_units, row = (pass + i) % row_units * R + r;
        if (row >= I || !(p.mask[u] >> t & 1)) continue;
        float gs = 0.0f, us = 0.0f;
        for (int w = 0; w < S; ++w) gs += part[i][w][2 * r * TC + t], us += part[i][w][(2 * r + 1) * TC + t];
        hg[static_cast<size_t>(hidden_row(p, u, t)) * I + row] = swiglu(gs, us, limit, p.weight[u][t]);
      }
      __syncthreads();  // part is written again by the next pass
    }
  };
  run_passes<T>(p, passes);
}

// grid (blocks per group, groups). Unit = output rows d0 .. d0 + R; warp w sums over its slice of
// the chunks of 32*V columns of every expert's I, the experts in plan order. `add_to_out`: the sum
// is added to out (a pass after the routed experts' one) instead of stored.
// One token of 16-byte dense weights (decode) keeps two stages of loads instead of batches: a
// warp's steps (unit, chunk) of a pass run as one sequence, the next step's R loads in flight
// while the current step is multiplied, so its loads never drain at a unit's end. The sums and
// their order are the batches' (bit for bit); 1-4 us a decode step on an H200
// (bench/results/decode-h200-2026-12-01-s15, run 9; -s16).
template <class T, int V, int TC>
__global__ void __launch_bounds__(kThreads, 2)
    down_kernel(const float* __restrict__ hidden, int n, int D, int I, const int32_t* __restrict__ experts, int k,
                int E, bool shared, bool add_to_out, const void* const* down, MatrixLayout layout,
                float* __restrict__ out) {
  constexpr int R = kQuantized<T> ? 4 : Shape<TC>::down_rows, M = R * TC;
  constexpr int kChunks = kQuantized<T> ? 1 : Shape<TC>::down_chunks;
  constexpr int kUnits = kPartFloats / (kWarps * M);
  constexpr bool kStaged = !kQuantized<T> && TC == 1 && V > 1;
  __shared__ Plan p;
  __shared__ float part[kUnits][kWarps][M];  // [unit of the pass][warp][r * TC + t]
  const int group = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  build_plan(p, experts, nullptr, n, k, E, shared, group, down, nullptr);
  const int units = (D + R - 1) / R;
  const int begin = static_cast<int>(int64_t{units} * blockIdx.x / gridDim.x);
  const int end = static_cast<int>(int64_t{units} * (blockIdx.x + 1) / gridDim.x);
  const int per_expert = (I + 32 * V - 1) / (32 * V), chunks = p.count * per_expert;
  const int c0 = chunks * warp / kWarps, c1 = chunks * (warp + 1) / kWarps;
  const int tokens = min(kGroup, n - group * kGroup);
  const float* hg = hidden + static_cast<size_t>(group) * kGroup * (k + 1) * I;
  bool waited = false;  // for gate_up's hidden (a programmatic dependency)
  const auto passes = [&](auto aligned) {
    for (int pass = begin; pass < end; pass += kUnits) {
      const int pass_units = min(kUnits, end - pass);
      if constexpr (kStaged) {
        const int per_unit = c1 - c0, steps = per_unit * pass_units;
        if (per_unit == 0 && lane < M)  // no chunk in this warp's slice: its sums are zeros
          for (int i = 0; i < pass_units; ++i) part[i][warp][lane] = 0.0f;
        // Step s: unit s / per_unit of the pass, chunk c0 + s % per_unit.
        const auto load_step = [&](int step, Weights<T, V> (&w)[R]) {
          const int d0 = (pass + step / per_unit) * R, c = c0 + step % per_unit;
          const int col = c % per_expert * 32 * V + lane * V;
#pragma unroll
          for (int r = 0; r < R; ++r)  // rows past D: read again, not kept
            w[r] = load_row<T, V, decltype(aligned)::value>(p.w[0][c / per_expert], layout, min(d0 + r, D - 1), col,
                                                            col < I);
        };
        float acc[M];
        const auto use_step = [&](int step, const Weights<T, V> (&w)[R]) {
          const int i = step / per_unit, c = c0 + step % per_unit, u = c / per_expert;
          const int col = c % per_expert * 32 * V + lane * V;
          if (c == c0)
#pragma unroll
            for (float& a : acc) a = 0.0f;
          if (p.mask[u] & 1) {
            float a[V];
            load_activations<V>(hg + static_cast<size_t>(p.base[u]) * I, col, col < I, a);
            accumulate<T, V, TC>(w, a, 0, acc);
          }
          if (c == c1 - 1) {
            const float s = warp_sums<M>(acc);
            if (lane < M) part[i][warp][lane] = s;
          }
        };
        Weights<T, V> even[R], odd[R];
        if (steps > 0) load_step(0, even);
        if (!waited) {
          cudaGridDependencySynchronize();
          waited = true;
        }
        for (int step = 0; step < steps; step += 2) {
          if (step + 1 < steps) load_step(step + 1, odd);
          use_step(step, even);
          if (step + 1 < steps) {
            if (step + 2 < steps) load_step(step + 2, even);
            use_step(step + 1, odd);
          }
        }
      } else {
        for (int i = 0; i < pass_units; ++i) {
          const int d0 = (pass + i) * R;
          float acc[M] = {};
          for (int c = c0; c < c1; c += kChunks) {
            Weights<T, V> w[kChunks][R];
            int u[kChunks], col[kChunks];
            bool ok[kChunks];
#pragma unroll
            for (int j = 0; j < kChunks; ++j) {
              ok[j] = c + j < c1;
              u[j] = ok[j] ? (c + j) / per_expert : 0;
              col[j] = (c + j) % per_expert * 32 * V + lane * V;
              ok[j] = ok[j] && col[j] < I;
              const void* m = p.w[0][u[j]];
#pragma unroll
              for (int r = 0; r < R; ++r)  // rows past D: read again, not kept
                w[j][r] = load_row<T, V, decltype(aligned)::value>(m, layout, min(d0 + r, D - 1), col[j], ok[j]);
            }
            if (!waited) {
              cudaGridDependencySynchronize();
              waited = true;
            }
#pragma unroll
            for (int j = 0; j < kChunks; ++j) {
              const uint32_t mask = p.mask[u[j]];
              const float* h = hg + static_cast<size_t>(p.base[u[j]]) * I;
#pragma unroll
              for (int t = 0; t < TC; ++t) {
                if (!(mask >> t & 1)) continue;
                float a[V];
                load_activations<V>(h, col[j], ok[j], a);
                h += I;  // the expert's next token's row
                accumulate<T, V, TC>(w[j], a, t, acc);
              }
            }
          }
          const float s = warp_sums<M>(acc);
          if (lane < M) part[i][warp][lane] = s;
        }
      }
      // out is written (or read) only after gate_up has ended: it may alias gate_up's inputs, and in
      // the shared expert's pass gate_up ends after the routed pass's down has written out.
      if (!waited) {
        cudaGridDependencySynchronize();
        waited = true;
      }
      __syncthreads();
      for (int idx = threadIdx.x; idx < pass_units * R * TC; idx += kThreads) {
        const int i = idx / (R * TC), r = idx / TC % R, t = idx % TC, d = (pass + i) * R + r;
        if (d >= D || t >= tokens) continue;
        float sum = 0.0f;
        for (int w = 0; w < kWarps; ++w) sum += part[i][w][r * TC + t];
        float& o = out[(static_cast<size_t>(group) * kGroup + t) * D + d];
        o = add_to_out ? o + sum : sum;
      }
      __syncthreads();
    }
  };
  run_passes<T>(p, passes);
  // This grid ends after gate_up's in every case, so work after it in the stream sees both.
  cudaGridDependencySynchronize();
}

// The layout of a [rows, cols] matrix of type t (weight_format.h).
MatrixLayout layout_of(WeightType t, int64_t rows, int64_t cols) {
  const int block = fp8_block(t), shift = block == 128 ? 7 : 5;
  return {weight_value_bytes(t, 1, cols), weight_scale_offset(t, rows, cols),
          block ? (cols + block - 1) / block : cols / 32, block ? shift : 0, shift};
}

// Multiprocessors x resident blocks of `kernel` on the current device, found once per device.
template <class Kernel>
int resident_blocks(Kernel kernel, std::atomic<int> (&cache)[kMaxDevices]) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return 1;
  int blocks = cache[device].load(std::memory_order_relaxed);
  if (blocks == 0) {
    int sms = 0, per_sm = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0);
    blocks = sms * per_sm;
    if (blocks < 1) return 1;  // a failed query: its error is returned after the launch
    cache[device].store(blocks, std::memory_order_relaxed);
  }
  return blocks;
}

// Blocks per group: the resident blocks shared among the groups, at most one a unit.
int blocks_for(int resident, int groups, int64_t units) {
  return static_cast<int>(std::clamp<int64_t>((resident + groups - 1) / groups, 1, std::max<int64_t>(units, 1)));
}

// One pass of the two kernels: the routed experts of k slots a token (k = 0: none), then the
// shared expert if `shared`; down adds to out if `add_to_out`, else stores. The pass takes
// 1/blocks_share of the blocks that fit on the GPU (more than 1: other kernels run beside it), and
// its down kernel's launch waits for `before_down` when given.
struct Pass {
  int k;
  bool shared, add_to_out;
  int blocks_share = 1;
  cudaEvent_t before_down = nullptr;
};

template <class T, int V, int TC>
cudaError_t launch(const float* x, int n, int D, int I, const int32_t* experts, const float* weights, Pass pass, int E,
                   const ExpertTables& tables, WeightType type, float limit, float* hidden, float* out,
                   cudaStream_t stream) {
  static std::atomic<int> gate_up_cache[kMaxDevices], down_cache[kMaxDevices];
  const int groups = (n + kGroup - 1) / kGroup;
  // Distinct experts of a group: the routed ones chosen, the shared one too.
  const int64_t experts_bound = std::min(std::min(n, kGroup) * pass.k, E) + (pass.shared ? 1 : 0);
  const int64_t gate_units = experts_bound * ((I + Shape<TC>::gate_rows - 1) / Shape<TC>::gate_rows);
  const int64_t down_units = (D + Shape<TC>::down_rows - 1) / Shape<TC>::down_rows;
  const auto blocks = [&](int resident, int64_t units) {
    return blocks_for(std::max(resident / pass.blocks_share, 1), groups, units);
  };
  const dim3 gate_grid(blocks(resident_blocks(gate_up_kernel<T, V, TC>, gate_up_cache), gate_units), groups);
  const dim3 down_grid(blocks(resident_blocks(down_kernel<T, V, TC>, down_cache), down_units), groups);
  if (const cudaError_t e = launch_dependent(gate_up_kernel<T, V, TC>, gate_grid, dim3(kThreads), 0, stream, x, n, D,
                                             I, experts, weights, pass.k, E, pass.shared, tables.gate, tables.up,
                                             layout_of(type, I, D), limit, hidden))
    return e;
  if (pass.before_down != nullptr)
    if (const cudaError_t e = cudaStreamWaitEvent(stream, pass.before_down, 0)) return e;
  return launch_dependent(down_kernel<T, V, TC>, down_grid, dim3(kThreads), 0, stream, hidden, n, D, I, experts,
                          pass.k, E, pass.shared, pass.add_to_out, tables.down, layout_of(type, D, I), out);
}

// Weights of T in one 16-byte load: 4 fp32, 8 bf16, 16 e4m3, 32 e2m1.
template <class T>
constexpr int kVector = std::is_same_v<T, Fp8> ? 16 : std::is_same_v<T, Fp4> ? 32 : 16 / sizeof(T);

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether the kernels of T read 16-byte loads (which FP8 / FP4 need): the activation rows allow them.
template <class T>
bool vector_loads(int D, int I, const float* x, const float* hidden) {
  return D % kVector<T> == 0 && I % kVector<T> == 0 && aligned16(x) && aligned16(hidden);
}

// 16-byte loads (vector_loads) with TC = the group's tokens rounded up to a power of two; single
// loads (TC = kGroup) otherwise. Expert matrices that are not 16-byte aligned are read element by
// element inside the kernels.
template <class T>
cudaError_t launch_type(const float* x, int n, int D, int I, const int32_t* experts, const float* weights, Pass pass,
                        int E, const ExpertTables& tables, WeightType type, float limit, float* hidden, float* out,
                        cudaStream_t stream) {
  constexpr int V = kVector<T>;
  const auto go = [&](auto launcher) {
    return launcher(x, n, D, I, experts, weights, pass, E, tables, type, limit, hidden, out, stream);
  };
  if (!vector_loads<T>(D, I, x, hidden)) {
    if constexpr (kQuantized<T>)
      return cudaErrorInvalidValue;  // refused up front by moe_experts
    else
      return go(launch<T, 1, kGroup>);
  }
  const int tokens = std::min(n, kGroup);
  if (tokens == 1) return go(launch<T, V, 1>);
  if (tokens == 2) return go(launch<T, V, 2>);
  if (tokens <= 4) return go(launch<T, V, 4>);
  return go(launch<T, V, 8>);
}

// `run` called with a value of the kernels' weight type for `type` (nothing for an unknown type).
template <class Run>
cudaError_t with_type(WeightType type, const Run& run) {
  switch (type) {
    case WeightType::F32:
      return run(float{});
    case WeightType::BF16:
      return run(bf16{});
    case WeightType::Fp8Block128:
    case WeightType::Fp8Block32:
      return run(Fp8{});
    case WeightType::Fp4:
      return run(Fp4{});
    case WeightType::Exl3:  // routed experts only, by exl3_routed_experts
      break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace

int64_t moe_hidden_floats(int n, int k, int D, int I, const ExpertTables& tables) {
  return tables.type == WeightType::Exl3 ? int64_t{n} * k * (2 * int64_t{I} + D) : int64_t{n} * (k + 1) * I;
}

namespace {

// The arguments every call takes, and both types (checked before anything runs: a refused shared
// pass must not follow a routed one). EXL3 routed experts are checked by exl3_routed_experts
// (before it runs); a shared one is refused.
cudaError_t check_call(const float* x, int n, int D, int I, const int32_t* experts, const float* weights, int k, int E,
                       const ExpertTables& tables, float limit, float* hidden, float* out) {
  if (n < 0 || D < 1 || I < 1 || k < 0 || k > kMaxK || E < 1 || !(limit > 0.0f)) return cudaErrorInvalidValue;
  if ((n + kGroup - 1) / kGroup > 65535) return cudaErrorInvalidValue;  // grid.y
  if (!x || (k > 0 && (!experts || !weights)) || !hidden || !out || !tables.gate || !tables.up || !tables.down)
    return cudaErrorInvalidValue;
  const auto servable = [&](WeightType type) {
    return with_type(type, [&](auto t) {
      using T = decltype(t);
      return kQuantized<T> && !vector_loads<T>(D, I, x, hidden) ? cudaErrorInvalidValue : cudaSuccess;
    });
  };
  if (const cudaError_t e = k == 0 || tables.type == WeightType::Exl3 ? cudaSuccess : servable(tables.type)) return e;
  return servable(tables.shared_type);
}

cudaError_t run_pass(const float* x, int n, int D, int I, const int32_t* experts, const float* weights, int E,
                     const ExpertTables& tables, WeightType type, Pass p, float limit, float* hidden, float* out,
                     cudaStream_t stream) {
  return with_type(type, [&](auto t) {
    return launch_type<decltype(t)>(x, n, D, I, experts, weights, p, E, tables, type, limit, hidden, out, stream);
  });
}

}  // namespace

cudaError_t moe_experts(const float* x, int n, int D, int I, const int32_t* experts, const float* weights, int k, int E,
                        const ExpertTables& tables, float limit, float* hidden, float* out, cudaStream_t stream) {
  if (k < 1) return cudaErrorInvalidValue;
  if (const cudaError_t e = check_call(x, n, D, I, experts, weights, k, E, tables, limit, hidden, out)) return e;
  const auto pass = [&](WeightType type, Pass p) {
    return run_pass(x, n, D, I, experts, weights, E, tables, type, p, limit, hidden, out, stream);
  };
  if (tables.type == WeightType::Exl3) {
    // The routed sum stored (it checks its own arguments before it runs), then the shared expert added.
    if (const cudaError_t e = exl3_routed_experts(x, n, D, I, experts, weights, k, E, tables, limit, hidden, out,
                                                  stream))
      return e;
    return n == 0 ? cudaSuccess : pass(tables.shared_type, {0, true, true});
  }
  if (n == 0) return cudaSuccess;
  if (tables.shared_type == tables.type) return pass(tables.type, {k, true, false});
  if (const cudaError_t e = pass(tables.type, {k, false, false})) return e;
  return pass(tables.shared_type, {0, true, true});
}

cudaError_t moe_shared_expert(const float* x, int n, int D, int I, int E, const ExpertTables& tables, float limit,
                              int blocks_share, float* hidden, float* out, cudaStream_t stream) {
  if (blocks_share < 1) return cudaErrorInvalidValue;
  if (const cudaError_t e = check_call(x, n, D, I, nullptr, nullptr, 0, E, tables, limit, hidden, out)) return e;
  if (n == 0) return cudaSuccess;
  return run_pass(x, n, D, I, nullptr, nullptr, E, tables, tables.shared_type, {0, true, false, blocks_share}, limit,
                  hidden, out, stream);
}

cudaError_t moe_routed_experts(const float* x, int n, int D, int I, const int32_t* experts, const float* weights, int k,
                               int E, const ExpertTables& tables, float limit, cudaEvent_t before_down, float* hidden,
                               float* out, cudaStream_t stream) {
  if (k < 1 || tables.type == WeightType::Exl3) return cudaErrorInvalidValue;
  if (const cudaError_t e = check_call(x, n, D, I, experts, weights, k, E, tables, limit, hidden, out)) return e;
  if (n == 0) return before_down ? cudaStreamWaitEvent(stream, before_down, 0) : cudaSuccess;  // still joined
  return run_pass(x, n, D, I, experts, weights, E, tables, tables.type, {k, false, true, 1, before_down}, limit, hidden,
                  out, stream);
}

}  // namespace frank::cuda
