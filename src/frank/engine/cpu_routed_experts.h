#pragma once
// The CPU's half of a MoE step whose routed experts are split between GPU and CPU (issue 7): the
// routings to CPU-homed experts, computed on the host from the weights as the checkpoint ships them.
//
//   partial[t] = sum over t's slots j with on_cpu[e_tj]  of  w_tj * expert_e(x_t),
//
// the slots taken in ascending expert id with fp32 accumulation, as engine::moe_forward takes them,
// so with every routed expert on the CPU, partial + shared(x) is moe_forward's output bit for bit.
// An expert whose three matrices are FP4 (DeepSeek-V4's routed experts as shipped) runs on the fast
// kernels over the thread pool (cpu/quant/expert_runner: fp32 sums, the bound in quant_gemv.h);
// any other expert (EXL3, FP8, dense) computes swiglu_expert's math bit for bit, split by blocks of
// 128 rows over the pool for each (expert, token).
#include <cstdint>
#include <span>

#include "frank/core/thread_pool.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::engine {

struct CpuRouting {
  const float* x;          // [n, hidden]
  int n;
  const int32_t* experts;  // [n, k]: routed experts; ids outside [0, E) are skipped
  const float* weights;    // [n, k]
  int k;
};

// Writes partial [n, hidden]. `on_cpu`: one flag per routed expert of this layer.
void cpu_routed_experts(ThreadPool& pool, const model::ModelConfig& c, const model::MoeWeights& w,
                        std::span<const uint8_t> on_cpu, const CpuRouting& r, float* partial);

}  // namespace frank::engine
