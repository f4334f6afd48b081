#pragma once
// The synthetic routing-trace generator: a stream of agent turns (prefill chunks, then decode and
// verify steps) whose tokens pick experts from a WorkloadModel, with consecutive tokens sharing
// experts more often than chance. Deterministic from its parameters (workload name and seed).
// Real recorded traces replace it wherever a trace is read; docs/trace-generator.md.
#include <cstddef>
#include <vector>

#include "frank/experts/generator_params.h"
#include "frank/experts/random_stream.h"
#include "frank/experts/routing_trace.h"
#include "frank/experts/workload_model.h"

namespace frank::experts {

class TraceGenerator {
 public:
  explicit TraceGenerator(const GeneratorParams& params);  // throws frank::Error on bad parameters

  TraceHeader header() const;
  const WorkloadModel& workload() const { return model_; }
  RoutingStep next_step();

 private:
  void start_turn();
  void pick_experts(uint32_t layer, bool prefill, uint16_t* out);

  GeneratorParams params_;
  WorkloadModel model_;
  RandomStream rng_;
  uint32_t phase_ = 0;
  uint64_t prefill_left_ = 0, decode_left_ = 0;
  std::vector<std::vector<uint16_t>> previous_;  // per layer, the previous token's experts
  std::vector<uint16_t> repeatable_;             // scratch: previous experts not yet picked
};

RoutingTrace generate_trace(const GeneratorParams& params, size_t steps);

}  // namespace frank::experts
