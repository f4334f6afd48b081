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

namespace {

// The top-p nucleus at a temperature: tokens sorted by logit (stable: lower id first on ties), their
// unnormalised weights exp((logit - max) / T) in double (the tail matters for top-p), how many of
// them the nucleus keeps and their total weight.
struct Nucleus {
  std::vector<int32_t> order;
  std::vector<double> weight;
  size_t keep = 0;
  double mass = 0.0;
};

Nucleus nucleus(std::span<const float> logits, const SamplingParams& params) {
  Nucleus k;
  const size_t n = logits.size();
  k.order.resize(n);
  std::iota(k.order.begin(), k.order.end(), 0);
  std::stable_sort(k.order.begin(), k.order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  k.weight.resize(n);
  const double mx = logits[k.order[0]];
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += k.weight[i] = std::exp((logits[k.order[i]] - mx) / params.temperature);
  while (k.keep < n && (k.keep == 0 || k.mass < params.top_p * sum)) k.mass += k.weight[k.keep++];
  return k;
}

}  // namespace

int32_t Sampler::next(std::span<const float> logits) {
  if (params_.temperature == 0.0f) return argmax(logits);
  const Nucleus k = nucleus(logits, params_);
  const double u = std::uniform_real_distribution<double>(0.0, k.mass)(rng_);
  double acc = 0.0;
  for (size_t i = 0; i < k.keep; ++i) {
    acc += k.weight[i];
    if (u < acc) return k.order[i];
  }
  return k.order[k.keep - 1];
}

std::vector<double> sampling_distribution(std::span<const float> logits, const SamplingParams& params) {
  std::vector<double> p(logits.size(), 0.0);
  if (params.temperature == 0.0f) {
    p[static_cast<size_t>(argmax(logits))] = 1.0;
    return p;
  }
  const Nucleus k = nucleus(logits, params);
  for (size_t i = 0; i < k.keep; ++i) p[static_cast<size_t>(k.order[i])] = k.weight[i] / k.mass;
  return p;
}

}  // namespace frank::engine
