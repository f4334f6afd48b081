#pragma once
// DeviceWeights: the model's weights in device memory, uploaded once on first use and found by the
// address of the host weight (so the shared model code passes the same weight structs to every
// backend). Dense Linear weights are stored as fp32 (exactness tests) or rounded to bf16 (serving;
// round to nearest even, as torch's .to(bfloat16)); everything else stays fp32. FP8 / FP4 Linear
// weights are stored as the checkpoint ships them (native_weight.h: their bytes and scales, about
// 1 and 0.5 bytes a weight) and computed on by the FP8 / FP4 kernels; so are a layer's routed
// experts when all their matrices are FP8 / FP4 of one type with rows the MoE kernels' loads fit,
// and its shared expert on the same terms with a type of its own (expert_types; DeepSeek-V4-Flash:
// FP4 routed, FP8 shared). A layer's routed experts that are all EXL3 with one bit width per role
// (gate, up, down; codebooks may differ) stay packed: each matrix's trellis, suh and svh in one
// buffer, the tables' entries pointing at their Exl3DeviceMatrix (ExpertTables, exl3_moe.cuh).
// Other experts and EXL3 weights (Linears, the shared expert, routed experts of mixed bits) are
// decoded on the host and stored like dense ones: FP8 / FP4 values are exact in either type,
// EXL3's are its fp32 decoding.
//
// Routed experts homed on the CPU by a plan (set_cpu_experts, issue 7) are never uploaded: their
// entries in the expert tables are null, and CudaOps::moe has the CPU compute them, unless the GPU
// cache (set_expert_cache, expert_cache_slots.h) holds a copy: then the entries point at its slot.
//
// A host weight with a shape but no data (model::skeleton_weights: a synthetic model at real size)
// is generated on the device instead: random, standard deviation 1/sqrt(columns) for Linear
// weights and 1 for tables, from `synthetic_seed`. A shape-only EXL3 weight (QuantizedMatrix of
// format Exl3 with rows, cols, bits and codebook, its trellis and sign vectors empty) kept packed
// gets random trellis words, suh of +-1/sqrt(columns) and svh of +-1 (random signs), which give
// it the dense synthetic weights' scale (exl3_matrix); decoded to dense, it is generated as a dense
// weight.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "frank/core/linear_weight.h"
#include "frank/core/tensor.h"
#include "frank/cuda/cpu_experts.h"
#include "frank/cuda/exl3_gemv.h"
#include "frank/cuda/expert_cache_slots.h"
#include "frank/cuda/ops.cuh"
#include "frank/engine/rope.h"
#include "frank/model/weights.h"

namespace frank::cuda {

// "fp32" or "bf16"; throws frank::Error for anything else.
WeightType parse_weight_type(const std::string& text);

// The bytes of `host` as DeviceWeights stores it as `type` in an expert table: FP8 / FP4 as shipped
// (`type` must be its own), fp32 or bf16 decoded on the host. frank::Error for a shape-only weight.
std::vector<uint8_t> stored_bytes(const LinearWeight& host, WeightType type);

// The types DeviceWeights stores a layer's experts in (ExpertTables::type, shared_type): for the
// routed experts (CPU-homed ones included: the cache slots copy them in it) and for the shared one,
// each the FP8 / FP4 type of all its matrices, as shipped, if they have one that the MoE kernels'
// 16-byte loads fit (cols a multiple of 16 e4m3 / 32 e2m1); else `dense` (decoded on the host).
struct ExpertTypes {
  WeightType routed, shared;
  int exl3_bits[3] = {};  // routed Exl3: the bits of gate, up, down
};
ExpertTypes expert_types(std::span<const model::ExpertWeights* const> routed, const model::ExpertWeights& shared,
                         WeightType dense);

class DeviceWeights {
 public:
  DeviceWeights(WeightType linear_type, cudaStream_t stream, uint64_t synthetic_seed = 0)
      : linear_type_(linear_type), stream_(stream), seed_(synthetic_seed) {}
  ~DeviceWeights();
  DeviceWeights(const DeviceWeights&) = delete;
  DeviceWeights& operator=(const DeviceWeights&) = delete;

  struct Linear {
    const void* data;
    WeightType type;
    int64_t rows, cols;
    size_t bytes() const { return static_cast<size_t>(weight_bytes(type, rows, cols)); }
  };

  const float* tensor(const Tensor& host);
  const Linear& linear(const LinearWeight& host);
  const float* inv_freq(const engine::RopeTable& rope);
  const int32_t* tid2eid(const model::MoeWeights& moe);
  // Device tables of the routed experts' and (at index E) the shared expert's weights, stored in
  // the types expert_types gives; a CPU-homed expert's entries are null.
  const ExpertTables& experts(const model::MoeWeights& moe);

  // Homes some routed experts on the CPU (before any expert is uploaded: frank::Error otherwise).
  void set_cpu_experts(std::unique_ptr<CpuExperts> cpu);
  CpuExperts* cpu_experts() const { return cpu_experts_.get(); }
  // Whether any routed expert is CPU-homed (then steps are issued eagerly, CudaModel).
  bool has_cpu_experts() const { return cpu_experts_ && cpu_experts_->homes().cpu_count() > 0; }
  // The device copy of the flags of `moe`'s layer, one byte per routed expert (1: the CPU computes
  // it: CPU-homed and not in a cache slot, CpuExperts::runs_on_cpu).
  const uint8_t* cpu_homes(const model::MoeWeights& moe);

  // GPU cache slots for CPU-homed experts (after set_cpu_experts, before the first step; none
  // without CPU-homed experts). Steps then end with end_step().
  void set_expert_cache(size_t slots, const experts::CachePolicy& policy);
  ExpertCacheSlots* expert_cache() const { return cache_.get(); }
  // After a step's kernels were issued on the stream: the cache's policy sees the step's routings
  // and starts its copies (ExpertCacheSlots::end_step). Without a cache the routings are dropped.
  void end_step();
  // Before a split layer's kernels: the stream waits for the copies the last end_step started.
  void wait_for_expert_copies();

  size_t bytes() const { return bytes_; }

 private:
  void* upload(const void* src, size_t bytes);
  const void* upload_linear(std::span<const float> values);
  // A Linear stored as `linear_type_` (a quantised one decoded on the host): the expert tables'
  // matrices of experts without a native type (expert_types).
  const Linear& dense_linear(const LinearWeight& host);
  // An EXL3 weight's trellis and sign vectors, packed in device memory (generated for a shape-only one).
  Exl3DeviceMatrix exl3_matrix(const LinearWeight& host);
  void* allocate(size_t bytes);
  // Device memory for a shape-only host weight, filled with random values.
  void* generate(int64_t count, WeightType type, float stddev);

  WeightType linear_type_;
  cudaStream_t stream_;
  uint64_t seed_;
  uint64_t generated_ = 0;  // weights generated so far: each gets its own stream of values
  std::vector<void*> buffers_;
  size_t bytes_ = 0;
  std::unordered_map<const void*, const void*> plain_;
  std::unordered_map<const void*, Linear> linear_;
  std::unordered_map<const void*, ExpertTables> experts_;
  std::unique_ptr<CpuExperts> cpu_experts_;
  std::unique_ptr<ExpertCacheSlots> cache_;
};

}  // namespace frank::cuda
