#pragma once
// `frank serve --record-routing FILE`: every forward step's routed experts, per layer, appended to
// a routing trace (docs/routing-traces.md) that `frank plan build` learns an expert plan from.
#include <string>

#include "frank/engine/session.h"
#include "frank/experts/routing_trace.h"
#include "frank/model/config.h"

namespace frank::server {

class RoutingRecorder {
 public:
  RoutingRecorder(const std::string& path, const model::ModelConfig& config);  // writes the header
  // The routing of the session's last forward call (prefill chunk, decode or verify step).
  void record(const engine::Session& session, experts::StepKind kind);

 private:
  experts::TraceWriter writer_;
};

// Distinct experts the session's last forward call touched, summed over layers: what a verify
// step costs when experts must be fetched.
int64_t experts_touched(const engine::Session& session);

}  // namespace frank::server
