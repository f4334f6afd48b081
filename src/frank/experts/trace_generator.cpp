#include "frank/experts/trace_generator.h"

#include <algorithm>

#include "frank/experts/model_fingerprint.h"

namespace frank::experts {

TraceGenerator::TraceGenerator(const GeneratorParams& params)
    : params_(params),
      model_(params),
      rng_(mix_seed(seed_of(params.workload), params.seed)),
      previous_(params.n_layers) {
  phase_ = rng_.below(model_.phases());
}

TraceHeader TraceGenerator::header() const {
  return {model_fingerprint(params_.model_type, params_.n_layers, params_.n_experts, params_.top_k), params_.n_layers,
          params_.n_experts, params_.top_k, kTraceFlagSynthetic};
}

// Lengths uniform on [1, 2 * mean - 1]: mean `mean`, no empty turns.
void TraceGenerator::start_turn() {
  auto length = [&](uint32_t mean) -> uint64_t { return mean ? 1 + rng_.below(2 * mean - 1) : 0; };
  prefill_left_ = length(params_.prefill_mean_tokens);
  decode_left_ = length(params_.decode_mean_tokens);
}

// A token's top_k distinct experts: each pick repeats one of the previous token's experts not yet
// picked with probability `persistence`, else draws by the phase's weights (successive sampling:
// a repeat is drawn again).
void TraceGenerator::pick_experts(uint32_t layer, bool prefill, uint16_t* out) {
  const std::vector<double>& cumulative = model_.cumulative_weights(layer, phase_, prefill);
  const std::vector<uint16_t>& previous = previous_[layer];
  const uint32_t k = params_.top_k;
  auto picked = [&](uint16_t e, uint32_t n) { return std::find(out, out + n, e) != out + n; };
  for (uint32_t j = 0; j < k; ++j) {
    if (!previous.empty() && rng_.uniform() < params_.persistence) {
      repeatable_.clear();
      for (uint16_t e : previous)
        if (!picked(e, j)) repeatable_.push_back(e);
      if (!repeatable_.empty()) {
        out[j] = repeatable_[rng_.below(static_cast<uint32_t>(repeatable_.size()))];
        continue;
      }
    }
    uint16_t e;
    do {
      const double x = rng_.uniform() * cumulative.back();
      e = static_cast<uint16_t>(std::upper_bound(cumulative.begin(), cumulative.end(), x) - cumulative.begin());
    } while (picked(e, j));
    out[j] = e;
  }
  previous_[layer].assign(out, out + k);
}

RoutingStep TraceGenerator::next_step() {
  if (prefill_left_ == 0 && decode_left_ == 0) start_turn();
  RoutingStep step;
  uint64_t tokens;
  if (prefill_left_ > 0) {
    step.kind = StepKind::Prefill;
    tokens = std::min<uint64_t>(prefill_left_, params_.prefill_chunk_tokens);
    prefill_left_ -= tokens;
  } else {
    const bool verify = params_.draft_tokens > 0 && rng_.uniform() < params_.verify_fraction;
    step.kind = verify ? StepKind::Verify : StepKind::Decode;
    tokens = std::min<uint64_t>(decode_left_, verify ? 1 + params_.draft_tokens : 1);
    decode_left_ -= tokens;
  }
  step.layers.assign(params_.n_layers, std::vector<uint16_t>(tokens * params_.top_k));
  for (uint64_t t = 0; t < tokens; ++t) {
    // Phase changes are a per-token coin with mean dwell phase_mean_tokens.
    if (model_.phases() > 1 && rng_.uniform() < 1.0 / params_.phase_mean_tokens)
      phase_ = (phase_ + 1 + rng_.below(model_.phases() - 1)) % model_.phases();
    for (uint32_t l = 0; l < params_.n_layers; ++l)
      pick_experts(l, step.kind == StepKind::Prefill, step.layers[l].data() + t * params_.top_k);
  }
  return step;
}

RoutingTrace generate_trace(const GeneratorParams& params, size_t steps) {
  TraceGenerator generator(params);
  RoutingTrace trace{"generated", generator.header(), {}};
  trace.steps.reserve(steps);
  for (size_t i = 0; i < steps; ++i) trace.steps.push_back(generator.next_step());
  return trace;
}

}  // namespace frank::experts
