#pragma once
// The CPU expert runtime's compute: the routed experts a step needs, each on its own tokens,
// spread over a thread pool. An expert is DeepSeek-V4's clamped SwiGLU on FP4 weights as shipped:
//   out = down · (silu(min(gate·x, limit)) * clamp(up·x, -limit, limit))
// Work is split by rows: first the gate and up rows of every expert (with the activation), then
// the down rows, in chunks of `rows_per_task`, so any number of experts and tokens keeps every
// thread streaming weights. Each output is computed by the same kernel on the same rows whatever
// the thread count, so the result does not depend on it (bit for bit).
#include <cstdint>
#include <span>

#include "frank/core/thread_pool.h"
#include "frank/cpu/quant/quant_gemv.h"

namespace frank::cpu {

struct Fp4Expert {
  Fp4Matrix gate, up;  // [intermediate, hidden]
  Fp4Matrix down;      // [hidden, intermediate]
};

struct ExpertCall {
  const Fp4Expert* expert;
  const float* x;  // [n, hidden]
  int64_t n;
  float* out;      // [n, hidden]
};

void run_experts(ThreadPool& pool, std::span<const ExpertCall> calls, float limit, CpuKernels level,
                 int64_t rows_per_task = 128);

}  // namespace frank::cpu
