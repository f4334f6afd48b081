#include "frank/server/routing_recorder.h"

#include <set>

#include "frank/experts/model_fingerprint.h"

namespace frank::server {
namespace {

experts::TraceHeader header_for(const model::ModelConfig& c) {
  experts::TraceHeader h;
  h.model_fingerprint = experts::model_fingerprint(c);
  h.n_layers = static_cast<uint32_t>(c.num_layers);
  h.n_experts = static_cast<uint32_t>(c.n_routed_experts);
  h.top_k = static_cast<uint32_t>(c.experts_per_token);
  return h;
}

}  // namespace

RoutingRecorder::RoutingRecorder(const std::string& path, const model::ModelConfig& config)
    : writer_(path, header_for(config)) {}

void RoutingRecorder::record(const engine::Session& session, experts::StepKind kind) {
  experts::RoutingStep step;
  step.kind = kind;
  for (const auto& layer : session.layers)
    step.layers.emplace_back(layer.last_call.experts.begin(), layer.last_call.experts.end());
  writer_.write(step);
}

int64_t experts_touched(const engine::Session& session) {
  int64_t n = 0;
  for (const auto& layer : session.layers)
    n += static_cast<int64_t>(std::set<int32_t>(layer.last_call.experts.begin(), layer.last_call.experts.end()).size());
  return n;
}

}  // namespace frank::server
