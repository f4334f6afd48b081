#include "frank/cuda/expert_cache_slots.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "frank/core/error.h"
#include "frank/cuda/device_array.h"
#include "frank/cuda/device_weights.h"
#include "frank/cuda/exl3_packed.h"

namespace frank::cuda {
namespace {

constexpr size_t kAlign = 256;  // each matrix of a slot starts at a cudaMalloc-like alignment
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::array<const LinearWeight*, 3> matrices(const model::ExpertWeights& e) { return {&e.gate, &e.up, &e.down}; }

// A matrix's bytes in a slot as a table of `type` stores it: its stored bytes (FP8 / FP4 as shipped,
// dense), or for EXL3 the Exl3DeviceMatrix the table entry points at, then its packed buffer
// (exl3_packed.h). Either way the entry points at the matrix's first byte in the slot.
size_t slot_matrix_bytes(const LinearWeight& m, WeightType type) {
  if (type == WeightType::Exl3) return aligned(sizeof(Exl3DeviceMatrix)) + static_cast<size_t>(exl3_buffer_bytes(*m.quantized));
  return static_cast<size_t>(weight_bytes(type, m.rows(), m.cols()));
}

// Writes the slot bytes of `m` to `at`; `device` is where they will lie on the GPU (an EXL3
// matrix's pointers point into its own buffer there).
void write_slot_matrix(const LinearWeight& m, WeightType type, uint8_t* at, const uint8_t* device) {
  if (type == WeightType::Exl3) {
    const size_t header = aligned(sizeof(Exl3DeviceMatrix));
    const Exl3DeviceMatrix matrix =
        exl3_device_matrix(*m.quantized, reinterpret_cast<const uint16_t*>(device + header));
    std::memcpy(at, &matrix, sizeof matrix);
    write_exl3_buffer(*m.quantized, at + header);
    return;
  }
  const std::vector<uint8_t> bytes = stored_bytes(m, type);
  if (bytes.size() != slot_matrix_bytes(m, type)) throw Error("expert cache: a matrix's stored bytes are not its type's size");
  std::memcpy(at, bytes.data(), bytes.size());
}

}  // namespace

ExpertCacheSlots::ExpertCacheSlots(size_t slots, const experts::CachePolicy& policy, const experts::ExpertHomes& homes)
    : n_experts_(homes.n_experts()),
      policy_(static_cast<size_t>(homes.n_layers()) * homes.n_experts(), experts::usable_cache_slots(homes, slots),
              policy),
      max_fills_per_step_(std::min(policy.max_fills_per_step, experts::usable_cache_slots(homes, slots))),
      slot_ids_(experts::usable_cache_slots(homes, slots), kFree),
      slot_of_(static_cast<size_t>(homes.n_layers()) * homes.n_experts(), kFree) {
  check(cudaStreamCreateWithFlags(&copies_, cudaStreamNonBlocking), "cudaStreamCreate (expert cache)");
  check(cudaEventCreateWithFlags(&step_done_, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&copies_done_, cudaEventDisableTiming), "cudaEventCreate");
}

ExpertCacheSlots::~ExpertCacheSlots() {
  if (copies_ != nullptr) cudaStreamSynchronize(copies_);
  cudaFree(device_);
  cudaFreeHost(staging_);
  cudaFreeHost(entry_values_);
  cudaFreeHost(flag_values_);
  cudaEventDestroy(step_done_);
  cudaEventDestroy(copies_done_);
  cudaStreamDestroy(copies_);
}

// One slot holds the largest CPU-homed expert as its layer's table stores it (every layer's table
// exists once a step has run).
void ExpertCacheSlots::allocate(DeviceWeights& weights, const CpuExperts& cpu) {
  const experts::ExpertHomes& homes = cpu.homes();
  for (int l = 0; l < homes.n_layers(); ++l) {
    if (homes.cpu_count(l) == 0) continue;
    const model::MoeWeights& moe = cpu.moe(l);
    const WeightType type = weights.experts(moe).type;
    for (int e = 0; e < homes.n_experts(); ++e) {
      if (!homes.on_cpu(l, e)) continue;
      size_t bytes = 0;
      for (const LinearWeight* m : matrices(moe.experts[static_cast<size_t>(e)]))
        bytes += aligned(slot_matrix_bytes(*m, type));
      slot_bytes_ = std::max(slot_bytes_, bytes);
    }
  }
  void* p = nullptr;
  check(cudaMalloc(&p, std::max<size_t>(1, slots() * slot_bytes_)), "cudaMalloc (GPU expert cache slots)");
  device_ = static_cast<uint8_t*>(p);
  check(cudaMallocHost(&p, std::max<size_t>(1, max_fills_per_step_ * slot_bytes_)), "cudaMallocHost (expert cache)");
  staging_ = static_cast<uint8_t*>(p);
  const size_t changes = std::max<size_t>(1, 2 * max_fills_per_step_);
  check(cudaMallocHost(&p, changes * 3 * sizeof(const void*)), "cudaMallocHost (expert cache)");
  entry_values_ = static_cast<const void**>(p);
  check(cudaMallocHost(&p, changes), "cudaMallocHost (expert cache)");
  flag_values_ = static_cast<uint8_t*>(p);
}

void ExpertCacheSlots::set_entries(DeviceWeights& weights, const CpuExperts& cpu, uint32_t id, const uint8_t* slot) {
  const int e = expert_of(id);
  const model::MoeWeights& moe = cpu.moe(layer_of(id));
  const ExpertTables& tables = weights.experts(moe);
  const void** values = entry_values_ + 3 * entries_used_;
  uint8_t* flag = flag_values_ + entries_used_;
  ++entries_used_;
  size_t offset = 0;
  const auto ms = matrices(moe.experts[static_cast<size_t>(e)]);
  for (size_t i = 0; i < ms.size(); ++i) {
    values[i] = slot != nullptr ? slot + offset : nullptr;
    offset += aligned(slot_matrix_bytes(*ms[i], tables.type));
  }
  *flag = slot != nullptr ? 0 : 1;
  // The tables and flags are DeviceWeights' device arrays; only the cache rewrites them, and only
  // the entries of CPU-homed experts (null while not cached).
  const void* const* table[3] = {tables.gate, tables.up, tables.down};
  for (size_t i = 0; i < 3; ++i)
    check(cudaMemcpyAsync(const_cast<const void**>(table[i]) + e, values + i, sizeof(const void*),
                          cudaMemcpyHostToDevice, copies_),
          "expert cache (table entry)");
  check(cudaMemcpyAsync(const_cast<uint8_t*>(weights.cpu_homes(moe)) + e, flag, 1, cudaMemcpyHostToDevice, copies_),
        "expert cache (home flag)");
}

// Converts the admitted experts' matrices into the staging buffer, one pool task per matrix
// (decoding an FP4 expert to bf16 takes tens of ms on one core); fill i goes to targets[i].
void ExpertCacheSlots::stage(DeviceWeights& weights, CpuExperts& cpu, std::span<uint8_t* const> targets) {
  struct Task {
    const LinearWeight* matrix;
    WeightType type;
    uint8_t* at;
    const uint8_t* device;
  };
  std::vector<Task> tasks;
  for (size_t i = 0; i < last_fills_.size(); ++i) {
    const uint32_t id = last_fills_[i];
    const model::MoeWeights& moe = cpu.moe(layer_of(id));
    const WeightType type = weights.experts(moe).type;
    size_t offset = 0;
    for (const LinearWeight* m : matrices(moe.experts[static_cast<size_t>(expert_of(id))])) {
      tasks.push_back({m, type, staging_ + i * slot_bytes_ + offset, targets[i] + offset});
      offset += aligned(slot_matrix_bytes(*m, type));
    }
    if (offset > slot_bytes_)
      throw Error(fmt::format("expert cache: expert {} of layer {} needs {} bytes, a slot has {}", expert_of(id),
                              layer_of(id), offset, slot_bytes_));
  }
  cpu.pool().parallel_for(std::ssize(tasks), [&](int64_t t) {
    const Task& task = tasks[static_cast<size_t>(t)];
    write_slot_matrix(*task.matrix, task.type, task.at, task.device);
  });
}

void ExpertCacheSlots::end_step(DeviceWeights& weights, CpuExperts& cpu, cudaStream_t stream) {
  const CpuExperts::StepUsage usage = cpu.take_step_usage();
  counters_.steps += 1;
  counters_.hit_routings += usage.hit_routings;
  counters_.miss_routings += usage.miss_routings;
  counters_.zero_miss_steps += usage.miss_routings == 0 ? 1 : 0;
  last_fills_.clear();
  if (slots() == 0) return;
  if (device_ == nullptr) allocate(weights, cpu);

  policy_.end_step(usage.used);
  std::vector<uint32_t> evicted_slots, free_slots;
  for (uint32_t s = 0; s < slots(); ++s) {
    if (slot_ids_[s] == kFree) free_slots.push_back(s);
    else if (!policy_.holds(slot_ids_[s])) evicted_slots.push_back(s);
  }
  for (const uint32_t id : usage.used)
    if (policy_.holds(id) && slot_of_[id] == kFree) last_fills_.push_back(id);
  if (evicted_slots.empty() && last_fills_.empty()) return;
  if (last_fills_.size() > free_slots.size() + evicted_slots.size() || last_fills_.size() > max_fills_per_step_)
    throw Error("expert cache: the policy admitted more experts than it has slots or fills per step");

  // The last step's copies read the staging and entry buffers reused below (long done by now), and
  // this step's kernels may still read the slots being freed.
  check(cudaEventSynchronize(copies_done_), "expert cache (previous copies)");
  check(cudaEventRecord(step_done_, stream), "cudaEventRecord");
  check(cudaStreamWaitEvent(copies_, step_done_), "cudaStreamWaitEvent");
  entries_used_ = 0;
  for (const uint32_t s : evicted_slots) {
    const uint32_t id = slot_ids_[s];
    set_entries(weights, cpu, id, nullptr);
    cpu.set_cached(layer_of(id), expert_of(id), false);
    slot_of_[id] = kFree;
    slot_ids_[s] = kFree;
    free_slots.push_back(s);
    counters_.evictions += 1;
  }
  std::vector<uint8_t*> targets;
  for (size_t i = 0; i < last_fills_.size(); ++i) targets.push_back(device_ + static_cast<size_t>(free_slots[i]) * slot_bytes_);
  stage(weights, cpu, targets);
  for (size_t i = 0; i < last_fills_.size(); ++i) {
    const uint32_t id = last_fills_[i], slot = free_slots[i];
    uint8_t* target = targets[i];
    check(cudaMemcpyAsync(target, staging_ + i * slot_bytes_, slot_bytes_, cudaMemcpyHostToDevice, copies_),
          "expert cache (fill a slot)");
    set_entries(weights, cpu, id, target);
    cpu.set_cached(layer_of(id), expert_of(id), true);
    slot_of_[id] = slot;
    slot_ids_[slot] = id;
    counters_.fills += 1;
  }
  check(cudaEventRecord(copies_done_, copies_), "cudaEventRecord");
  copies_pending_ = true;
}

ExpertCacheSlots::Counters ExpertCacheSlots::counters() const {
  return {counters_.steps.load(), counters_.hit_routings.load(), counters_.miss_routings.load(),
          counters_.zero_miss_steps.load(), counters_.fills.load(), counters_.evictions.load()};
}

void ExpertCacheSlots::wait_for_copies(cudaStream_t stream) {
  if (!copies_pending_) return;
  check(cudaStreamWaitEvent(stream, copies_done_), "cudaStreamWaitEvent (expert cache copies)");
  copies_pending_ = false;
}

}  // namespace frank::cuda
