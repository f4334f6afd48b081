// EXL3 routed experts of the MoE (exl3_moe.cuh).
#include <algorithm>
#include <type_traits>

#include "frank/cuda/exl3_block.cuh"
#include "frank/cuda/exl3_gemv.h"
#include "frank/cuda/exl3_moe.cuh"
#include "frank/cuda/launch.cuh"
#include "frank/cuda/moe_plan.cuh"

namespace frank::cuda {
namespace {

using namespace exl3;

constexpr int kWarps = kTilesPerBlock, kThreads = 32 * kWarps;  // warp j: output tile j of the block
constexpr int kSumThreads = 256;
// slot_kernel's transformed inputs, in dynamic shared memory without opting in to more than 48 KB
// (cudaFuncSetAttribute): D and I up to 8192 (DeepSeek's are at most 5120).
constexpr int64_t kMaxTransformBytes = 8192 * sizeof(float);

// The matrices of one launch's role (gate, up or down): the table of every expert's matrix, and
// the outputs y [slots, rows].
struct Role {
  const void* const* table;
  float* y;
};
struct Roles {
  Role role[2];  // blockIdx.z picks one
};

// The matrix of slot `slot` in `table`, or null when the slot adds nothing (an id outside [0, E),
// a null entry: a CPU-homed expert).
__device__ __forceinline__ const Exl3DeviceMatrix* slot_matrix(const void* const* table, const int32_t* experts,
                                                             int slot, int E) {
  const int e = experts[slot];
  return e < 0 || e >= E ? nullptr : static_cast<const Exl3DeviceMatrix*>(table[e]);
}

// y[slot] = W x for one 128-output block of the slot's matrix, grid (output blocks, slots, roles).
// Input of gate and up (!kDown): x[slot / k]. Of down: the slot's h from the gate and up outputs
// (g, u [slots, cols]) and its routing weight. The warps first transform every input block (u =
// H(suh ∘ x), each warp every 8th block) into `transformed` (dynamic shared memory, padded cols
// floats); then warp j streams output tile j of every block with no further synchronisation, in
// block order (the sums of exl3_linear's kernel over a single slice).
template <int K, bool kDown>
__global__ void __launch_bounds__(kThreads)
    slot_kernel(Roles roles, const float* x, const float* g, const float* u, const int32_t* experts,
                const float* weights, int k, int E, float limit) {
  follow_previous_kernel();
  extern __shared__ __align__(16) float transformed[];  // [padded cols]
  __shared__ __align__(16) float z[kBlock];
  const int slot = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Role role = roles.role[blockIdx.z];
  const Exl3DeviceMatrix* m = slot_matrix(role.table, experts, slot, E);
  if (m == nullptr) return;  // the whole block
  const Exl3DeviceMatrix w = *m;
  const int64_t tiles_n = padded(w.rows) / kTileSide, k_blocks = padded(w.cols) / kBlock;
  const int64_t nt = static_cast<int64_t>(blockIdx.x) * kTilesPerBlock + warp;
  const float* row = kDown ? nullptr : x + static_cast<int64_t>(slot / k) * w.cols;
  const float* gs = kDown ? g + static_cast<int64_t>(slot) * w.cols : nullptr;
  const float* us = kDown ? u + static_cast<int64_t>(slot) * w.cols : nullptr;
  const float weight = kDown ? weights[slot] : 0.0f;
  const auto input = [&](int64_t i) {
    if constexpr (kDown)
      return moe::swiglu(gs[i], us[i], limit, weight);
    else
      return row[i];
  };
  for (int64_t kb = warp; kb < k_blocks; kb += kWarps)
    input_block(w.suh, w.cols, kb, true, input, transformed + kb * kBlock);
  __syncthreads();
  const LaneStates<K> states(lane);
  float acc[1][2] = {{0.0f, 0.0f}};  // columns lane / 4 and lane / 4 + 8 of output tile nt
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    BlockWords<K> block;
    block.load(states, w.trellis, kb, tiles_n, nt);
    block.accumulate(states, w.codebook, reinterpret_cast<const float(*)[kBlock]>(transformed + kb * kBlock), acc);
  }
  column_sums(acc);
  if (lane % 4 == 0) z[warp * kTileSide + lane / 4] = acc[0][0], z[warp * kTileSide + lane / 4 + 8] = acc[0][1];
  __syncthreads();
  if (warp == 0) {
    float v[4] = {z[4 * lane], z[4 * lane + 1], z[4 * lane + 2], z[4 * lane + 3]};
    output_block(v, w.svh, w.rows, static_cast<int64_t>(blockIdx.x) * kBlock + 4 * lane,
                 role.y + static_cast<int64_t>(slot) * w.rows);
  }
}

// out[t][d] = the down outputs y [slots, D] of token t's slots that add something, in ascending
// expert id and slot order among equal ids (engine::moe_forward's order), from 0. grid (D blocks, n).
__global__ void __launch_bounds__(kSumThreads)
    sum_kernel(const float* y, const void* const* down, const int32_t* experts, int k, int E, int D, float* out) {
  follow_previous_kernel();
  const int t = blockIdx.y;
  const int64_t d = static_cast<int64_t>(blockIdx.x) * kSumThreads + threadIdx.x;
  if (d >= D) return;
  int order[moe::kMaxK], count = 0;  // insertion sort by (id, slot): k <= 16
  for (int j = 0; j < k; ++j) {
    const int slot = t * k + j;
    if (slot_matrix(down, experts, slot, E) == nullptr) continue;
    int at = count++;
    for (; at > 0 && experts[t * k + order[at - 1]] > experts[slot]; --at) order[at] = order[at - 1];
    order[at] = j;
  }
  float sum = 0.0f;
  for (int i = 0; i < count; ++i) sum = __fadd_rn(sum, y[static_cast<int64_t>(t * k + order[i]) * D + d]);
  out[static_cast<int64_t>(t) * D + d] = sum;
}

// slot_kernel's dynamic shared memory for `cols` inputs: their transform.
int64_t transform_bytes(int64_t cols) { return (cols + kBlock - 1) / kBlock * kBlock * sizeof(float); }

// One launch of slot_kernel over `count` roles of `rows` outputs and `cols` inputs each, all of `bits`.
template <bool kDown>
cudaError_t launch_roles(int bits, const Roles& roles, int count, int64_t rows, int64_t cols, int slots,
                         const float* x, const float* g, const float* u, const int32_t* experts, const float* weights,
                         int k, int E, float limit, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((rows + kBlock - 1) / kBlock), static_cast<unsigned>(slots),
                  static_cast<unsigned>(count));
  return with_bits(bits, [&](auto b) {
    return launch_dependent(slot_kernel<decltype(b)::value, kDown>, grid, dim3(kThreads),
                            static_cast<size_t>(transform_bytes(cols)), stream, roles, x, g, u, experts, weights, k, E,
                            limit);
  });
}

}  // namespace

cudaError_t exl3_routed_experts(const float* x, int n, int D, int I, const int32_t* experts, const float* weights,
                                int k, int E, const ExpertTables& tables, float limit, float* scratch, float* out,
                                cudaStream_t stream) {
  const int64_t slots = int64_t{n} * k;
  if (n < 0 || k < 1 || k > moe::kMaxK || E < 1 || slots > 65535 || !scratch) return cudaErrorInvalidValue;  // grid.y
  if (transform_bytes(std::max(D, I)) > kMaxTransformBytes) return cudaErrorInvalidValue;
  for (int bits : tables.exl3_bits)
    if (bits < 1 || bits > 8) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int s = static_cast<int>(slots);
  float* g = scratch;
  float* u = g + slots * I;
  float* y = u + slots * I;
  const auto gate_up = [&](const Roles& roles, int count, int bits) {
    return launch_roles<false>(bits, roles, count, I, D, s, x, nullptr, nullptr, experts, weights, k, E, limit,
                               stream);
  };
  const int gate_bits = tables.exl3_bits[0], up_bits = tables.exl3_bits[1], down_bits = tables.exl3_bits[2];
  if (gate_bits == up_bits) {
    if (const cudaError_t e = gate_up(Roles{{{tables.gate, g}, {tables.up, u}}}, 2, gate_bits)) return e;
  } else {
    if (const cudaError_t e = gate_up(Roles{{{tables.gate, g}, {}}}, 1, gate_bits)) return e;
    if (const cudaError_t e = gate_up(Roles{{{tables.up, u}, {}}}, 1, up_bits)) return e;
  }
  if (const cudaError_t e = launch_roles<true>(down_bits, Roles{{{tables.down, y}, {}}}, 1, D, I, s, nullptr, g, u,
                                               experts, weights, k, E, limit, stream))
    return e;
  const dim3 grid(static_cast<unsigned>((D + kSumThreads - 1) / kSumThreads), static_cast<unsigned>(n));
  return launch_dependent(sum_kernel, grid, dim3(kSumThreads), 0, stream, static_cast<const float*>(y), tables.down,
                          experts, k, E, D, out);
}

}  // namespace frank::cuda
