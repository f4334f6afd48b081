#pragma once
// ExpertCacheSlots: the GPU cache slots of issue 7 (--expert-cache-slots N). N slots of device
// memory, one routed expert's weights each, hold copies of CPU-homed experts, chosen by the policy
// the simulator models (experts::ExpertCache, the same class: docs/expert-plans.md, "Cache
// policy"). While an expert has a copy, its entries in the device expert tables point at the slot
// and its home flag reads "GPU", so the GPU computes it and the host skips it (CpuExperts).
//
// After each step (DeviceWeights::end_step, on the host, once the host has the step's routings):
//   1. the policy sees the step's CPU-homed experts (CpuExperts::take_step_usage) and decides;
//   2. each evicted expert's table entries go back to null and its flag to "CPU";
//   3. each admitted expert's weights are converted on the host to the table's routed format
//      (ExpertTables::type, as DeviceWeights stores it: stored_bytes; on CpuExperts' pool; the
//      shared expert's type, which may differ, plays no part) into pinned staging, then
//      copied into its slot, and its entries and flag are pointed at the slot.
// Everything the GPU reads is written on a side stream that first waits for the step's kernels
// (an evicted slot may still be read by them); the next step's first split layer waits for the
// copies (wait_for_copies), so they overlap the step's first layers and the host's work between
// steps. The host's view (CpuExperts::set_cached) changes at once: the next step's host work
// comes after that wait. The host conversion (step 3) is on the critical path between steps: the
// CPU homes are the checkpoint's pageable memory, not pinned.
// EXL3 routed experts kept packed (ExpertTables type Exl3) take slots too: a matrix's slot bytes are
// its Exl3DeviceMatrix (the table entry points at it, its pointers at the slot's copy) then its
// packed buffer, written on the host like the other types' (exl3_packed.h).
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "frank/cuda/cpu_experts.h"
#include "frank/experts/expert_cache.h"
#include "frank/experts/expert_homes.h"

namespace frank::cuda {

class DeviceWeights;

class ExpertCacheSlots {
 public:
  struct Counters {
    uint64_t steps = 0;
    uint64_t hit_routings = 0;   // routings to CPU-homed experts that ran on a GPU copy
    uint64_t miss_routings = 0;  // ... that ran on the host
    uint64_t zero_miss_steps = 0;
    uint64_t fills = 0, evictions = 0;
  };

  // `slots`: at most one per CPU-homed expert is used (experts::usable_cache_slots).
  ExpertCacheSlots(size_t slots, const experts::CachePolicy& policy, const experts::ExpertHomes& homes);
  ~ExpertCacheSlots();
  ExpertCacheSlots(const ExpertCacheSlots&) = delete;
  ExpertCacheSlots& operator=(const ExpertCacheSlots&) = delete;

  size_t slots() const { return slot_ids_.size(); }
  // Device memory the slots take (allocated at the first end_step): slots() * one expert's bytes.
  size_t device_bytes() const { return slots() * slot_bytes_; }
  // A snapshot; safe to take from another thread than the one running steps (the server's /metrics).
  Counters counters() const;
  // The experts (layer * E + expert) the last end_step admitted, ascending.
  const std::vector<uint32_t>& last_fills() const { return last_fills_; }

  // Ends a step whose kernels were issued on `stream` (see above).
  void end_step(DeviceWeights& weights, CpuExperts& cpu, cudaStream_t stream);
  // `stream` waits for the copies the last end_step started.
  void wait_for_copies(cudaStream_t stream);

 private:
  void allocate(DeviceWeights& weights, const CpuExperts& cpu);
  // Points the table entries and flag of expert `id` at `slot` (nullptr: back to the CPU).
  void set_entries(DeviceWeights& weights, const CpuExperts& cpu, uint32_t id, const uint8_t* slot);
  void stage(DeviceWeights& weights, CpuExperts& cpu, std::span<uint8_t* const> targets);

  static constexpr uint32_t kFree = UINT32_MAX;
  int layer_of(uint32_t id) const { return static_cast<int>(id / static_cast<uint32_t>(n_experts_)); }
  int expert_of(uint32_t id) const { return static_cast<int>(id % static_cast<uint32_t>(n_experts_)); }
  int n_experts_;
  experts::ExpertCache policy_;
  size_t max_fills_per_step_;
  std::vector<uint32_t> slot_ids_;  // the expert in each slot, or kFree
  std::vector<uint32_t> slot_of_;   // by expert id: its slot, or kFree
  size_t slot_bytes_ = 0;
  uint8_t* device_ = nullptr;       // slots() * slot_bytes_
  uint8_t* staging_ = nullptr;      // pinned: max_fills_per_step_ experts
  // Pinned sources of the table entries and flags written this step: 3 pointers and 1 flag per
  // changed expert (at most 2 * max_fills_per_step_: an eviction and a fill each).
  const void** entry_values_ = nullptr;
  uint8_t* flag_values_ = nullptr;
  size_t entries_used_ = 0;
  cudaStream_t copies_ = nullptr;
  cudaEvent_t step_done_ = nullptr, copies_done_ = nullptr;
  bool copies_pending_ = false;
  struct {
    std::atomic<uint64_t> steps{0}, hit_routings{0}, miss_routings{0}, zero_miss_steps{0}, fills{0}, evictions{0};
  } counters_;
  std::vector<uint32_t> last_fills_;
};

}  // namespace frank::cuda
