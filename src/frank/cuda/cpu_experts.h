#pragma once
// CpuExperts: the host side of a MoE step whose routed experts are split between GPU memory and CPU
// RAM by a plan (issue 7). The CPU-homed experts stay in host memory, as the checkpoint ships them
// (DeviceWeights never uploads them); a host thread (the worker) computes the routings to them on a
// pinned thread pool (engine::cpu_routed_experts) while the GPU computes the rest, and CudaOps::moe
// adds the two.
//
// The handshake (hybrid_moe.cuh) needs no host call inside a step, so a split step can be captured
// as a CUDA graph and replayed, and an eager one is issued without waiting for the host:
//   GPU stream: route -> hand_over: a kernel copies x, experts, weights into host-mapped pinned
//               memory and publishes the layer's sequence number -> the GPU's experts (CPU-homed ones
//               dropped) -> add_sum: a kernel spins until the host published the same number in
//               return, then the CPU's sum (host-mapped) is added
//   worker:     (core/handshake_worker.h) spins until the next sequence number arrives -> computes
//               the CPU's sum into pinned memory (concurrently with the GPU's experts) -> publishes
//               the number (release store)
// A kernel, not cudaLaunchHostFunc, signals the host: a host node holds the stream until CUDA's
// callback thread has run it, a thread wake-up per layer on the GPU's path, and the callback would
// still have to wake the worker; the worker spinning on mapped memory sees the number one PCIe
// write after the GPU stores it. The worker spins only
// while the host knows hand-overs are coming (expected, below), and sleeps between steps.
//
// The host counts the hand-overs it issued: hand_over() counts itself when issued eagerly; while
// the stream is capturing it counts into captured(), and a graph's launcher calls expect() with the
// graph's count after each launch. The worker serves exactly as many, in order; finish() waits for
// them. The GPU's sequence numbers are counted on the device (a graph replays the same parameters).
// A host exception while computing a layer does not stop the GPU: the worker publishes the layer
// with a zero sum and the error, which finish() (so take_step_usage(), take_times()) rethrows as a
// frank::Error. The destructor stops the worker and releases any GPU wait still pending (its sum is
// then garbage: only a CUDA error or a dropped model can leave one), then waits for the device.
//
// A CPU-homed expert with a copy in a GPU cache slot (ExpertCacheSlots) runs on the GPU: the host
// skips it (runs_on_cpu), and counts the step's routings to CPU-homed experts as hits (a copy ran
// them) or misses (the host did), for the cache's policy and counters (take_step_usage). The cache
// changes runs_on_cpu between steps only, after take_step_usage() (the worker is idle then).
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "frank/core/handshake_worker.h"
#include "frank/core/thread_pool.h"
#include "frank/cuda/hybrid_moe.cuh"
#include "frank/experts/expert_homes.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::cuda {

class CpuExperts {
 public:
  // Hand-overs of up to this many tokens use buffers allocated once, so graphs may capture them;
  // longer ones (prefill chunks, never captured) use buffers that grow.
  static constexpr int kCapturedTokens = 16;

  // `threads`: the pool's size, pinned to cores 0..threads-1 (0: every hardware thread); the
  // worker is the pool's calling thread, on core 0.
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
  // The pinned pool, also used between steps (the GPU cache's host-side conversions): only after
  // finish(), while the worker is idle.
  ThreadPool& pool() { return *pool_; }

  // The routings of the steps since the last call to CPU-homed experts: hits ran on a GPU copy,
  // misses on the host; `used` holds each (layer, expert) used once, as layer * E + expert,
  // ascending within a layer (experts::ExpertCache::end_step's input). Calls finish() first.
  struct StepUsage {
    std::vector<uint32_t> used;
    uint64_t hit_routings = 0, miss_routings = 0;
  };
  StepUsage take_step_usage();
  // The main model's layer whose MoE `moe` is, or -1 (not a main layer's, e.g. the MTP block's).
  int layer_of(const model::MoeWeights& moe) const;
  // The layer of `moe` when some of its routed experts are CPU-homed, else -1.
  int cpu_layer(const model::MoeWeights& moe) const;

  // Issues on `stream` the hand-over of layer `layer`'s activations x [n, hidden] and routing
  // [n, k] to the worker (see above). While `stream` is capturing, n must be <= kCapturedTokens.
  void hand_over(int layer, const float* x, int n, const int32_t* experts, const float* weights, int k,
                 cudaStream_t stream);
  // Issues on `stream`, after the GPU's share of the layer handed over last: the wait for the
  // worker's sum, and out [n, hidden] += it.
  void add_sum(float* out, int n, cudaStream_t stream);
  // Hand-overs issued into stream captures so far; a launch of a graph that captured `count` of
  // them was issued: the worker serves them.
  int64_t captured() const { return captured_; }
  void expect(int64_t count);
  // Waits until the worker has served every hand-over issued or expected; rethrows the first error
  // it met (a frank::Error) since the last call, and a failed stream's CUDA error.
  void finish();

  // Events around the GPU's share of a split layer (its experts' kernels), read by take_times(),
  // when timing is on and the stream is not capturing (a benchmark, which must then call
  // take_times() after every step or so).
  void time_gpu_share(bool on) { timing_ = on; }
  void gpu_share_begin(cudaStream_t stream);
  void gpu_share_end(cudaStream_t stream);

  // Since the last take_times(), which calls finish() and waits for the GPU: the worker's time
  // computing the CPU's sums and waiting for the routing to arrive (from when it knew a hand-over
  // was coming, or served the previous one), GPU time of the GPU's share of the same layers; the
  // layers computed and the distinct CPU experts they ran.
  struct Times {
    double compute_seconds = 0, wait_seconds = 0, gpu_share_seconds = 0;
    int64_t layers = 0, experts = 0;
  };
  Times take_times();

 private:
  // Pinned host buffers of one hand-over, host-mapped (the GPU addresses them at the same pointers).
  struct Buffers {
    float* x = nullptr;
    int32_t* experts = nullptr;
    float* weights = nullptr;
    float* partial = nullptr;
    int64_t capacity_tokens = 0;
  };
  void allocate(Buffers& b, int64_t tokens);
  static void release(Buffers& b);
  Buffers& buffers(int n) { return n <= kCapturedTokens ? captured_buffers_ : eager_buffers_; }
  // On the worker: the CPU's sum of the layer handed over (`waited`: seconds spent waiting for it).
  void serve_layer(int layer, int n, double waited);
  void record_usage(int layer, const Buffers& b, int n);

  const model::ModelConfig& config_;
  experts::ExpertHomes homes_;
  std::unordered_map<const model::MoeWeights*, int> layers_;
  std::vector<const model::MoeWeights*> moes_;  // by layer
  std::vector<uint8_t> runs_on_cpu_;             // [layers * E]
  std::unique_ptr<ThreadPool> pool_;             // made on the worker (its calling thread is pinned)

  Buffers captured_buffers_, eager_buffers_;
  HandshakeMailbox* mailbox_ = nullptr;    // host-mapped, at the same address on the GPU
  HandshakeCounters* counters_ = nullptr;  // device memory
  cudaStream_t stream_ = nullptr;          // the last hand-over's, checked for errors by finish()
  int64_t captured_ = 0;
  StepUsage usage_;  // written by the worker, read after finish()
  Times times_;      // likewise (the GPU share's time: by take_times())
  std::unique_ptr<HandshakeWorker> worker_;

  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> gpu_share_events_;  // reused after take_times()
  size_t gpu_shares_ = 0;                                              // pairs recorded since
  bool timing_ = false;
};

}  // namespace frank::cuda
