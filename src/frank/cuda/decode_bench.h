#pragma once
// `frank bench decode`: the decode (or k-token verify) step of DeepSeek-V4-Flash on the GPU at the
// real dimensions, with random weights made in device memory (no checkpoint) and a random session
// state at context `ctx` (no prefill). Per layer and per step it reports the median time and spread
// over many CUDA-graph replays, the bytes of weights and state the step had to read, and the
// achieved bandwidth as a fraction of the read bandwidth measured in the same run. With K=V rows
// stored in bf16 or fp8 it also reports the KL of the step's next-token distributions against the
// same session stored in fp32 (the same random rows, unrounded). With per_op, each op's time and
// the moe op's read rate, its routed experts' format named: runs with --format fp8-fp4 and
// exl3-kN put the FP4 and EXL3 expert GEMVs side by side.
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "frank/cuda/ops.cuh"
#include "frank/experts/expert_cache.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::cuda {

struct DecodeBenchOptions {
  int layers = 4;               // the first layers of V4-Flash: 2 sliding, then CSA and HCA alternating
  int64_t ctx = 32768;          // tokens already in the session
  int tokens_per_step = 1;      // 1 = decode; k+1 = a verify step of k drafts
  int steps = 100;              // timed graph replays
  WeightType weights = WeightType::BF16;
  // --format fp8-fp4: the Linear weights in the formats V4-Flash ships (model/shipped_formats.h),
  // random codes made on the host and kept as shipped on the GPU; `weights` is then the BF16 rest's.
  bool shipped_formats = false;
  // --format exl3-kN (with shipped_formats): the main layers' routed experts EXL3 at N bits, 3INST,
  // shape-only on the host (the GPU makes their trellis; the CPU-homed ones of a split get host data).
  int exl3_bits = 0;
  KvFormat kv = KvFormat::F32;  // how the session stores K=V rows; not fp32: also the KL of one step against fp32 rows
  bool same_experts = false;    // every layer hash-routed and every token the same id: all tokens pick the same experts
  uint64_t seed = 1;
  // The step's independent chains (CudaOps::set_branches: attention's, the shared expert) issued in
  // order on one stream instead of as two graph branches: what the branches save.
  bool one_stream = false;
  bool per_op = false;          // also time every op of eagerly issued steps (where the time goes)
  // Routed experts split between GPU and CPU (issue 7; split_decode_bench.cpp): a plan, or a GPU
  // memory budget for the weights (the default ordering), and the CPU's pinned threads (0: all).
  std::string plan;
  std::optional<double> gpu_memory_budget_gb;
  unsigned cpu_expert_threads = 0;
  size_t expert_cache_slots = experts::kDefaultCacheSlots;  // GPU copies of CPU-homed experts (expert_cache_slots.h)
  bool split_graphs = false;  // the split step replayed as a captured CUDA graph (else issued eagerly)
  // A routing trace whose experts every step routes to (bench_routing.h; empty: the router's choice).
  std::string routing_from;
  bool split() const { return !plan.empty() || gpu_memory_budget_gb.has_value(); }
};

// The benchmark's synthetic model at the real size: shape-only weights the GPU fills with random
// values, or with options.shipped_formats the FP8 / FP4 ones made as random codes (and the EXL3
// routed experts shape-only, with options.exl3_bits).
model::ModelWeights bench_weights(const model::ModelConfig& config, const DecodeBenchOptions& options);
// The bytes one Linear / one expert takes on the GPU: FP8 / FP4 as shipped, EXL3 packed at its bits
// (core/packed_bytes.h, shape-only ones too), the rest in `linear_type`.
double stored_linear_bytes(const LinearWeight& m, WeightType linear_type);
double stored_expert_bytes(const model::ExpertWeights& expert, WeightType linear_type);
// For the reports: the weights' formats, and the routed experts' alone ("FP4", "EXL3 3-bit", "bf16").
std::string weights_description(const DecodeBenchOptions& options);
std::string routed_expert_format(const DecodeBenchOptions& options);

// Runs the benchmark; writes a markdown report to `out`. With options.split(), the split step's
// benchmark (run_split_decode_bench).
void run_decode_bench(const DecodeBenchOptions& options, std::ostream& out);

// The decode step with some routed experts homed on the CPU (FP4 as shipped, or EXL3 at
// options.exl3_bits; random, in host memory), issued eagerly: step time, the CPU's and the GPU's
// expert time, against the bound from the GPU's and the host's read bandwidths, both measured in
// the same run.
void run_split_decode_bench(const DecodeBenchOptions& options, std::ostream& out);

// The GPU's read bandwidth (bytes/s): the median of 20 reads of a 4 GiB buffer.
double measure_read_bandwidth(cudaStream_t stream);

}  // namespace frank::cuda
