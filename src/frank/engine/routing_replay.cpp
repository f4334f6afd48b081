#include "frank/engine/routing_replay.h"

#include <fmt/format.h>

#include "frank/core/error.h"

namespace frank::engine {

int moe_layer(const model::ModelWeights& weights, const model::MoeWeights& moe) {
  for (size_t l = 0; l < weights.layers.size(); ++l)
    if (&weights.layers[l].moe == &moe) return static_cast<int>(l);
  return -1;
}

RoutingReplay::RoutingReplay(const experts::RoutingTrace& trace, const model::ModelConfig& c, ReplayedSteps steps)
    : source_(trace.source), layers_(c.num_layers), top_k_(c.experts_per_token) {
  const experts::TraceHeader& h = trace.header;
  const auto refuse = [&](const std::string& what) {
    return Error(fmt::format("routing trace '{}' cannot drive this model's routing: {}", source_, what));
  };
  if (h.n_layers != static_cast<uint32_t>(c.num_layers) || h.n_experts != static_cast<uint32_t>(c.n_routed_experts) ||
      h.top_k != static_cast<uint32_t>(c.experts_per_token))
    throw refuse(fmt::format("it has {} layers of {} experts, top-{}; the model has {} layers of {} experts, top-{} "
                             "(generate one of the model's shape: frank plan generate-trace --layers {} --experts {} "
                             "--top-k {})",
                             h.n_layers, h.n_experts, h.top_k, c.num_layers, c.n_routed_experts, c.experts_per_token,
                             c.num_layers, c.n_routed_experts, c.experts_per_token));
  ids_.resize(layers_);
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    if (steps == ReplayedSteps::Generation && trace.steps[s].kind == experts::StepKind::Prefill) continue;
    const auto& step = trace.steps[s].layers;
    if (step.size() != static_cast<size_t>(layers_))
      throw refuse(fmt::format("step {} has {} layers, the header {}", s, step.size(), layers_));
    for (int l = 0; l < layers_; ++l) {
      if (step[l].size() != step[0].size())
        throw refuse(fmt::format("step {}: layer {} routes {} tokens, layer 0 {}", s, l, step[l].size() / top_k_,
                                 step[0].size() / top_k_));
      ids_[l].insert(ids_[l].end(), step[l].begin(), step[l].end());
    }
  }
  tokens_ = static_cast<int64_t>(ids_[0].size()) / top_k_;
  if (tokens_ == 0)
    throw refuse(steps == ReplayedSteps::Generation ? "it routes no tokens in decode or verify steps"
                                                     : "it routes no tokens");
}

RoutingReplay RoutingReplay::from_file(const std::string& path, const model::ModelConfig& config,
                                       ReplayedSteps steps) {
  return RoutingReplay(experts::read_trace(path), config, steps);
}

ForcedRouting RoutingReplay::take(int64_t n) {
  ForcedRouting f{n, top_k_, std::vector<int32_t>(static_cast<size_t>(layers_ * n * top_k_))};
  for (int l = 0; l < layers_; ++l)
    for (int64_t t = 0; t < n; ++t)
      for (int j = 0; j < top_k_; ++j)
        f.experts[(l * n + t) * top_k_ + j] = ids_[l][((next_ + t) % tokens_) * top_k_ + j];
  next_ = (next_ + n) % tokens_;
  return f;
}

}  // namespace frank::engine
