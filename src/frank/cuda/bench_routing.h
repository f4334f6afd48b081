#pragma once
// Routing replay in `frank bench decode` (--routing-from TRACE; engine/routing_replay.h): every
// timed step routes its tokens to the next tokens' experts of the trace's generation (decode and
// verify) steps, uploaded into the step's
// Ids before the step is issued (or its graph replayed), so the step itself never waits on the host.
#include <optional>
#include <string>
#include <vector>

#include "frank/cuda/cuda_ops.h"
#include "frank/engine/routing_replay.h"
#include "frank/model/config.h"

namespace frank::cuda {

class BenchRouting {
 public:
  // `trace` empty: the router chooses (random weights: close to uniform). Throws frank::Error for a
  // trace that does not fit `config` (routing_replay.h).
  BenchRouting(const std::string& trace, const model::ModelConfig& config, int tokens_per_step);

  bool replayed() const { return replay_.has_value(); }
  // The step's ids uploaded by `ops`, with the trace's first step when replayed.
  CudaOps::Ids upload(const CudaOps& ops, const std::vector<int32_t>& ids);
  // Writes the next step's experts into ids.forced_experts (stream-ordered, before the step's
  // kernels) and returns the distinct experts of each layer in them; without a trace, nothing.
  std::vector<int> next_step(CudaOps::Ids& ids);
  // One line for the report: what drove routing.
  std::string describe() const;

 private:
  std::optional<engine::RoutingReplay> replay_;
  int layers_, tokens_per_step_;
  int64_t steps_taken_ = 0;
};

}  // namespace frank::cuda
