#include "frank/cuda/bench_routing.h"

#include <fmt/format.h>

#include <set>

#include "frank/core/error.h"

namespace frank::cuda {
namespace {

std::vector<int> distinct_per_layer(const engine::ForcedRouting& f, int layers) {
  std::vector<int> distinct;
  for (int l = 0; l < layers; ++l) {
    const int32_t* ids = f.layer(l);
    distinct.push_back(static_cast<int>(std::set<int32_t>(ids, ids + f.tokens * f.top_k).size()));
  }
  return distinct;
}

}  // namespace

BenchRouting::BenchRouting(const std::string& trace, const model::ModelConfig& config, int tokens_per_step)
    : layers_(config.num_layers), tokens_per_step_(tokens_per_step) {
  // The bench times decode and verify steps: it replays the trace's generation steps.
  if (!trace.empty())
    replay_.emplace(engine::RoutingReplay::from_file(trace, config, engine::ReplayedSteps::Generation));
}

CudaOps::Ids BenchRouting::upload(const CudaOps& ops, const std::vector<int32_t>& ids) {
  if (!replay_) return ops.upload_ids(ids);
  const engine::ForcedRouting first = replay_->take(tokens_per_step_);
  ++steps_taken_;
  return ops.upload_ids(ids, &first);
}

std::vector<int> BenchRouting::next_step(CudaOps::Ids& ids) {
  if (!replay_) return {};
  const engine::ForcedRouting f = replay_->take(tokens_per_step_);
  ++steps_taken_;
  // A pageable upload: staged before cudaMemcpyAsync returns, so `f` may go out of scope.
  ids.forced_experts.copy_from_host(f.experts.data());
  return distinct_per_layer(f, layers_);
}

std::string BenchRouting::describe() const {
  if (!replay_) return "Routing: the router's own choice (random weights: close to uniform over the experts).";
  return fmt::format("Routing: replayed from the trace '{}' (the {} tokens of its decode and verify steps, cycled; "
                     "{} steps of {} token(s) taken): the trace's experts, weighted by the router's scores.",
                     replay_->source(), replay_->trace_tokens(), steps_taken_, tokens_per_step_);
}

}  // namespace frank::cuda
