#pragma once
// CpuExperts: the host side of a MoE step whose routed experts are split between GPU memory and CPU
// RAM by a plan (issue 7). The CPU-homed experts stay in host memory, as the checkpoint ships them
// (DeviceWeights never uploads them); the host computes the routings to them on a pinned thread
// pool (engine::cpu_routed_experts) while the GPU computes the rest, and CudaOps::moe adds the two.
//
// Version 1 synchronises with the host, once per MoE layer that has CPU experts:
//   GPU stream: route -> copy x, experts, weights to pinned host memory -> [event] -> the GPU's
//               experts (CPU-homed ones dropped) -> copy the CPU's sum up -> add it
//   host:       wait for the event -> compute the CPU's sum (concurrently with the GPU's experts)
//               -> issue the upload and the add
// so such a step cannot be captured as a CUDA graph: CudaModel issues it eagerly, and download()
// refuses a capturing stream. A step with no CPU-homed expert in any layer is unchanged.
//
// A CPU-homed expert with a copy in a GPU cache slot (ExpertCacheSlots) runs on the GPU: the host
// skips it (runs_on_cpu), and counts the step's routings to CPU-homed experts as hits (a copy ran
// them) or misses (the host did), for the cache's policy and counters (take_step_usage).
#include <cuda_runtime.h>

#include <utility>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "frank/core/thread_pool.h"
#include "frank/experts/expert_homes.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::cuda {

class CpuExperts {
 public:
  // `threads`: the pool's size, pinned to cores 0..threads-1 (0: every hardware thread).
  CpuExperts(const model::ModelConfig& config, const model::ModelWeights& weights, experts::ExpertHomes homes,
             unsigned threads = 0);
  ~CpuExperts();
  CpuExperts(const CpuExperts&) = delete;
  CpuExperts& operator=(const CpuExperts&) = delete;

  const experts::ExpertHomes& homes() const { return homes_; }
  // Layer `layer`'s experts the host computes, one byte per expert: CPU-homed and not cached.
  std::span<const uint8_t> runs_on_cpu(int layer) const;
  // A CPU-homed expert got (true) or lost (false) its GPU copy: from the next step the GPU runs it.
  void set_cached(int layer, int expert, bool cached);
  const model::MoeWeights& moe(int layer) const { return *moes_[static_cast<size_t>(layer)]; }
  // The pinned pool, also used between steps (the GPU cache's host-side conversions).
  ThreadPool& pool() { return pool_; }

  // The routings of the steps since the last call to CPU-homed experts: hits ran on a GPU copy,
  // misses on the host; `used` holds each (layer, expert) used once, as layer * E + expert,
  // ascending within a layer (experts::ExpertCache::end_step's input).
  struct StepUsage {
    std::vector<uint32_t> used;
    uint64_t hit_routings = 0, miss_routings = 0;
  };
  StepUsage take_step_usage() { return std::exchange(usage_, {}); }
  // The main model's layer whose MoE `moe` is, or -1 (not a main layer's, e.g. the MTP block's).
  int layer_of(const model::MoeWeights& moe) const;
  // The layer of `moe` when some of its routed experts are CPU-homed, else -1.
  int cpu_layer(const model::MoeWeights& moe) const;

  // Issues on `stream` the copies of a layer's activations x [n, hidden] and routing [n, k] to
  // pinned host memory, and an event after them. Throws frank::Error if the stream is capturing.
  void download(const float* x, int n, const int32_t* experts, const float* weights, int k, cudaStream_t stream);
  // Waits for download()'s copies, computes the routings of the step to `layer`'s CPU-homed experts
  // and returns their weighted sum [n, hidden] in pinned host memory. It stays valid until the next
  // download() (whose event comes after any upload of it issued on the same stream in between).
  const float* compute(int layer, const model::MoeWeights& moe);

  // Events around the GPU's share of a split layer (its experts' kernels), read by take_times(),
  // when timing is on (a benchmark, which must then call take_times() after every step or so).
  void time_gpu_share(bool on) { timing_ = on; }
  void gpu_share_begin(cudaStream_t stream);
  void gpu_share_end(cudaStream_t stream);

  // Since the last take_times(), which waits for the GPU: host time computing the CPU's sums and
  // waiting for the routing to arrive, GPU time of the GPU's share of the same layers; the layers
  // computed and the distinct CPU experts they ran.
  struct Times {
    double compute_seconds = 0, wait_seconds = 0, gpu_share_seconds = 0;
    int64_t layers = 0, experts = 0;
  };
  Times take_times();

 private:
  void reserve(int n, cudaStream_t stream);

  const model::ModelConfig& config_;
  experts::ExpertHomes homes_;
  std::unordered_map<const model::MoeWeights*, int> layers_;
  std::vector<const model::MoeWeights*> moes_;  // by layer
  std::vector<uint8_t> runs_on_cpu_;             // [layers * E]
  StepUsage usage_;
  ThreadPool pool_;
  // Pinned host buffers of the current layer (cudaMallocHost).
  float* x_ = nullptr;
  int32_t* experts_ = nullptr;
  float* weights_ = nullptr;
  float* partial_ = nullptr;
  int64_t capacity_tokens_ = 0;
  int n_ = 0;
  cudaEvent_t arrived_ = nullptr;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> gpu_share_events_;  // reused after take_times()
  size_t gpu_shares_ = 0;                                              // pairs recorded since
  bool timing_ = false;
  Times times_;
};

}  // namespace frank::cuda
