#pragma once
// Where each routed expert of a model lives when it runs: GPU memory or CPU RAM (issue 7). The
// homes come from an expert plan (--plan FILE, validated against the model), or from a GPU memory
// budget for the weights (--gpu-memory-budget GB): the routed experts that do not fit go to the
// CPU, chosen by the default ordering (baseline_plans.h). Given both, the plan is used and must fit
// the budget. The budget also holds the GPU cache slots (--expert-cache-slots, one routed expert
// each, cuda/expert_cache_slots.h): a user's budget caps the weights' GPU memory, so the slots
// come out of it. Every problem is a frank::Error at start, before any step runs.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "frank/experts/expert_plan.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::experts {

class ExpertHomes {
 public:
  // Every routed expert on the GPU.
  ExpertHomes(int n_layers, int n_experts);
  // The plan's homes; its shape must be the model's (parse_plan checked the fingerprint).
  ExpertHomes(const ExpertPlan& plan, const model::ModelConfig& config);

  int n_layers() const { return n_layers_; }
  int n_experts() const { return n_experts_; }
  bool on_cpu(int layer, int expert) const { return on_cpu_[index(layer, expert)] != 0; }
  // Layer `layer`'s flags, one byte per expert (1: CPU-homed).
  std::span<const uint8_t> layer(int layer) const;
  size_t cpu_count() const;
  size_t cpu_count(int layer) const;

 private:
  size_t index(int layer, int expert) const { return static_cast<size_t>(layer) * n_experts_ + expert; }
  int n_layers_, n_experts_;
  std::vector<uint8_t> on_cpu_;
};

// The bytes the model's weights take in GPU memory when Linear weights are stored with
// `linear_value_bytes` per value (bf16: 2, fp32: 4; quantised weights are decoded to that type)
// and everything else as fp32: the routed experts of the main layers, each (the mean over them),
// and all the rest. A routed expert's matrix that the model holds quantized counts packed
// (core/packed_bytes.h: FP8 / FP4 as shipped, EXL3 at its bits, a shape-only EXL3 one too), as
// DeviceWeights keeps a layer's experts when they share one format (cuda/device_weights.h); a
// layer it decodes to dense instead is undercounted. `linear_bytes`, when given, is what every other Linear takes instead of its
// values (a benchmark's shape-only weights in their shipped formats, model/shipped_formats.h).
struct GpuWeightBytes {
  double other = 0;          // embedding, head, attention, routers, shared experts, norms, mHC, MTP
  double routed_expert = 0;  // one routed expert (gate, up, down)
};
using LinearBytes = std::function<double(const model::WeightSlot&)>;
GpuWeightBytes gpu_weight_bytes(const model::ModelConfig& config, const model::ModelWeights& weights,
                                int linear_value_bytes, const LinearBytes& linear_bytes = {});

struct HomeRequest {
  std::string plan_path;                 // empty: none
  std::optional<double> budget_gb;       // GPU memory for the weights, 1e9 bytes
  size_t cache_slots = 0;                // GPU cache slots the budget must also hold
};

// The cache slots that have a use: no more than the CPU-homed experts.
size_t usable_cache_slots(const ExpertHomes& homes, size_t cache_slots);

// The homes for `request` (all on the GPU when it names neither a plan nor a budget). Errors name
// the option: an unreadable or invalid plan (parse_plan's messages: unknown layer or expert,
// duplicates, wrong fingerprint, ...), a budget below what the weights other than routed experts
// need, a plan whose GPU experts (plus the usable cache slots) exceed the budget, a budget with
// experts on the CPU and room for fewer experts than the cache slots.
ExpertHomes choose_expert_homes(const model::ModelConfig& config, const GpuWeightBytes& bytes,
                                const HomeRequest& request);

}  // namespace frank::experts
