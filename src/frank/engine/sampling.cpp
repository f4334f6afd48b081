#include "frank/engine/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "frank/core/error.h"

namespace frank::engine {

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  if (!(params.temperature >= 0.0f) || !std::isfinite(params.temperature))
    throw Error(fmt::format("temperature must be a finite number >= 0, got {}", params.temperature));
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f))
    throw Error(fmt::format("top_p must be in (0, 1], got {}", params.top_p));
}

int32_t Sampler::next(std::span<const float> logits) {
  if (params_.temperature == 0.0f) return argmax(logits);
  const size_t n = logits.size();
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  // Probabilities of the sorted tokens at this temperature (double: the tail matters for top-p).
  std::vector<double> p(n);
  const double mx = logits[order[0]];
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += p[i] = std::exp((logits[order[i]] - mx) / params_.temperature);
  size_t keep = 0;
  double mass = 0.0;
  while (keep < n && (keep == 0 || mass < params_.top_p * sum)) mass += p[keep++];
  const double u = std::uniform_real_distribution<double>(0.0, mass)(rng_);
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

}  // namespace frank::engine
