#pragma once
// The MoE's EXL3 routed experts (moe_experts with ExpertTables::type Exl3, ops.cuh), each matrix
// kept packed (trellis, suh, svh: Exl3DeviceMatrix) and decoded where it is used. Every routed
// slot (token t, choice j) of expert e = experts[t*k + j] is computed on its own, as
// engine::moe_forward computes it, in three or four launches:
//   1. gate and up, grid (output blocks of 128, slots, role): g = W_gate_e x_t, u = W_up_e x_t, each
//      as cpu::linear_rows computes it (u = H(suh ∘ x), Q^T u with the trellis decoded on the fly,
//      z -> svh ∘ H(z)); one launch when gate and up have the same bits, else one each;
//   2. down, the same over h = (silu(min(g, limit)) * clamp(u, ±limit)) * weight, formed where it
//      is read (the reference's operations in its order): y = W_down_e h;
//   3. out[t] = y of t's slots added in ascending expert id, slot order among equal ids (the
//      reference's order), stored.
// A block first transforms all its slot's inputs into shared memory (each warp every 8th block of
// 128), then each warp streams its output tile over them with no further synchronisation. Each
// block sums its own inputs (no k split): every value is summed by one thread in a fixed
// order, no atomics, so every run gives the same bits; against the CPU only the order of each
// GEMV's sum differs (the bound of tests/cuda/test_cuda_exl3.cpp, per GEMV). Expert ids come from
// device memory and the grid depends on n, k, D, I and the bits only: graph-capturable. Slots with
// an id outside [0, E) or a null entry (a CPU-homed expert) add nothing. Weights are read once per
// slot: tokens that share an expert read it again (left for later: one read per distinct expert).
#include <cstdint>

#include <cuda_runtime.h>

#include "frank/cuda/ops.cuh"

namespace frank::cuda {

// out [n, D] = the routed experts' sum (the shared expert is the caller's); `scratch` holds
// n*k * (2*I + D) floats (moe_hidden_floats). cudaErrorInvalidValue, before anything runs, for bits
// outside 1..8, k outside 1..16, more than 65535 slots, or D or I over 8192.
cudaError_t exl3_routed_experts(const float* x, int n, int D, int I, const int32_t* experts, const float* weights,
                                int k, int E, const ExpertTables& tables, float limit, float* scratch, float* out,
                                cudaStream_t stream);

}  // namespace frank::cuda
