#pragma once
// Routing replay (`--routing-from TRACE`): forward calls route their tokens to the experts a
// routing trace (docs/routing-traces.md) recorded instead of the router's top-k, so that a model
// with synthetic weights (whose router spreads tokens uniformly) is benchmarked under realistic,
// skewed expert traffic. Only the choice is replaced: the router still scores every expert, and
// the chosen experts' weights are their scores normalised to sum 1 (engine::route's rule for
// any set of experts), so the rest of the step computes as usual.
//
// The trace is read as one stream of tokens (its steps' tokens in order, or only its generation
// steps'); each forward call of n tokens takes the next n, wrapping around at the end. This covers every layer of the model
// (hash-routed layers too); the MTP block's MoE, which the trace has no layer for, routes as usual.
#include <cstdint>
#include <string>
#include <vector>

#include "frank/experts/routing_trace.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::engine {

// The routed experts of one forward call: experts[(l * tokens + t) * top_k + j] is token t's j-th
// expert in layer l.
struct ForcedRouting {
  int64_t tokens = 0;
  int top_k = 0;
  std::vector<int32_t> experts;  // [num_layers, tokens, top_k]

  const int32_t* layer(int l) const { return experts.data() + int64_t{l} * tokens * top_k; }
};

// The index of the model layer whose MoE weights are `moe`, or -1 (the MTP block's).
int moe_layer(const model::ModelWeights& weights, const model::MoeWeights& moe);

// Which of the trace's steps are replayed: all, or only generation steps (decode and verify; what
// a decode benchmark times, whose routing differs from prefill chunks').
enum class ReplayedSteps { All, Generation };

class RoutingReplay {
 public:
  // Throws frank::Error when the trace's layer count, expert count or top-k differ from the
  // model's, when its replayed steps have no tokens, or when a step's layers disagree on its token
  // count.
  RoutingReplay(const experts::RoutingTrace& trace, const model::ModelConfig& config,
                ReplayedSteps steps = ReplayedSteps::All);
  static RoutingReplay from_file(const std::string& path, const model::ModelConfig& config,
                                 ReplayedSteps steps = ReplayedSteps::All);

  const std::string& source() const { return source_; }  // the trace file
  int64_t trace_tokens() const { return tokens_; }
  // The next n tokens' experts; advances (and wraps around) the trace.
  ForcedRouting take(int64_t n);

 private:
  std::string source_;
  int layers_ = 0, top_k_ = 0;
  int64_t tokens_ = 0, next_ = 0;
  std::vector<std::vector<uint16_t>> ids_;  // per layer: every token's experts, token-major
};

}  // namespace frank::engine
