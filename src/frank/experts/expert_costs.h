#pragma once
// The cost model behind predicted step times (docs/expert-plans.md, "Cost model").
//
// At decode and verify sizes (a few tokens) a routed expert is memory-bound: its cost in a step
// is reading its weights once, whatever number of tokens chose it. So a layer costs
//   max(cpu_experts * cpu_seconds, gpu_experts * gpu_seconds)
// where the counts are the distinct experts the step used on each side (CPU and GPU experts of a
// layer run concurrently; layers run one after another), and a step is the sum over its layers.
// Attention and the shared expert are left out: they are the same under every plan.
#include <cstddef>

namespace frank::experts {

// One DeepSeek-V4-Flash routed expert in its FP4 checkpoint format: w1, w3 [2048, 4096] and
// w2 [4096, 2048], 4 bits per weight, plus one e8m0 scale byte per 32 weights.
inline constexpr double kV4FlashExpertBytes = 3.0 * (2048.0 * 4096 / 2 + 2048.0 * 4096 / 32);  // 13,369,344
// Default bandwidths until measured ones are given: ~100 GB/s effective from a workstation's
// DDR5 channels, ~4 TB/s from HBM-class GPU memory.
inline constexpr double kDefaultCpuBytesPerSecond = 100e9;
inline constexpr double kDefaultGpuBytesPerSecond = 4e12;

class ExpertCosts {
 public:
  // Defaults: kV4FlashExpertBytes over the default bandwidths (133.7 us on the CPU, 3.3 us on the GPU).
  ExpertCosts();
  // Measured seconds to run one expert once in a step; throws frank::Error unless positive and finite.
  ExpertCosts(double cpu_seconds_per_expert, double gpu_seconds_per_expert);
  static ExpertCosts from_bandwidth(double expert_bytes, double cpu_bytes_per_second, double gpu_bytes_per_second);

  double cpu_seconds() const { return cpu_seconds_; }
  double gpu_seconds() const { return gpu_seconds_; }
  double layer_seconds(size_t cpu_experts, size_t gpu_experts) const;

 private:
  double cpu_seconds_;
  double gpu_seconds_;
};

}  // namespace frank::experts
