#include "frank/experts/workload_model.h"

#include <fmt/format.h>

#include <cmath>
#include <numeric>

#include "frank/core/error.h"
#include "frank/experts/model_fingerprint.h"
#include "frank/experts/popularity_calibration.h"
#include "frank/experts/random_stream.h"

namespace frank::experts {
namespace {

std::vector<uint16_t> identity(uint32_t n) {
  std::vector<uint16_t> v(n);
  std::iota(v.begin(), v.end(), uint16_t{0});
  return v;
}

// hot_fraction * n_experts per layer, geometric in depth with ratio depth_gradient between the
// first and the last layer, rescaled to keep the mean.
std::vector<double> hot_counts(const GeneratorParams& p) {
  std::vector<double> counts(p.n_layers);
  double mean = 0;
  for (uint32_t l = 0; l < p.n_layers; ++l) {
    const double depth = p.n_layers > 1 ? static_cast<double>(l) / (p.n_layers - 1) : 0.5;
    counts[l] = std::pow(p.depth_gradient, 0.5 - depth);
    mean += counts[l] / p.n_layers;
  }
  for (uint32_t l = 0; l < p.n_layers; ++l) {
    counts[l] *= p.hot_fraction * p.n_experts / mean;
    if (counts[l] < p.top_k || counts[l] >= p.n_experts)
      throw Error(
          fmt::format("trace generator: layer {} would have a hot set of {:.1f} experts, outside "
                      "top_k..experts-1 (lower depth_gradient or change hot_fraction)",
                      l, counts[l]));
  }
  return counts;
}

// Step 2: the workload's ranking of one layer: the first `overlap` of the hot set from the base
// ranking, the rest of the hot set drawn from the other experts, each part in the workload's order.
std::vector<uint16_t> workload_ranking(const std::vector<uint16_t>& base, size_t hot, double overlap,
                                       RandomStream& rng) {
  const auto shared = static_cast<std::ptrdiff_t>(std::lround(overlap * static_cast<double>(hot)));
  std::vector<uint16_t> others(base.begin() + shared, base.end());
  rng.shuffle(others);
  const auto own = static_cast<std::ptrdiff_t>(hot) - shared;
  std::vector<uint16_t> ranking(base.begin(), base.begin() + shared);
  ranking.insert(ranking.end(), others.begin(), others.begin() + own);
  rng.shuffle(ranking);  // the hot set's order
  std::vector<uint16_t> cold(others.begin() + own, others.end());
  rng.shuffle(cold);
  ranking.insert(ranking.end(), cold.begin(), cold.end());
  return ranking;
}

// A random `shift` fraction of the ranks and a permutation of them: position ranks[i] takes the
// expert from position ranks[order[i]].
struct RankShuffle {
  std::vector<uint32_t> ranks, order;

  RankShuffle(uint32_t n, double shift, RandomStream& rng) : ranks(n) {
    std::iota(ranks.begin(), ranks.end(), 0u);
    rng.shuffle(ranks);
    ranks.resize(static_cast<size_t>(std::lround(shift * n)));
    order.resize(ranks.size());
    std::iota(order.begin(), order.end(), 0u);
    rng.shuffle(order);
  }

  std::vector<uint16_t> apply(const std::vector<uint16_t>& ranking) const {
    std::vector<uint16_t> shuffled = ranking;
    for (size_t i = 0; i < ranks.size(); ++i) shuffled[ranks[i]] = ranking[ranks[order[i]]];
    return shuffled;
  }
};

}  // namespace

WorkloadModel::WorkloadModel(const GeneratorParams& p) : phases_(p.phases) {
  validate(p);
  hot_count_ = hot_counts(p);
  const uint64_t model_seed = seed_of(model_fingerprint(p.model_type, p.n_layers, p.n_experts, p.top_k));
  const uint64_t workload_seed = seed_of(p.workload);
  const double shift = p.phases > 1 ? p.phase_shift : 0.0;
  for (uint32_t l = 0; l < p.n_layers; ++l) {
    RandomStream base_rng(mix_seed(model_seed, l));
    std::vector<uint16_t> base = identity(p.n_experts);
    base_rng.shuffle(base);
    RandomStream workload_rng(mix_seed(workload_seed, l));
    const auto hot = static_cast<size_t>(std::lround(hot_count_[l]));
    ranking_.push_back(workload_ranking(base, hot, p.overlap, workload_rng));

    // Steps 3 and 4: rankings indexed [phase * 2 + prefill], weighted by phase (equally likely)
    // and by the expected share of prefill tokens.
    const double prefill_fraction = static_cast<double>(p.prefill_mean_tokens) /
                                    (static_cast<double>(p.prefill_mean_tokens) + p.decode_mean_tokens);
    RandomStream prefill_rng(mix_seed(mix_seed(workload_seed, l), 999));
    const RankShuffle prefill_view(p.n_experts, p.prefill_shift, prefill_rng);
    RankingMix mix;
    for (uint32_t ph = 0; ph < p.phases; ++ph) {
      RandomStream phase_rng(mix_seed(mix_seed(workload_seed, l), 1000 + ph));
      const std::vector<uint16_t> generated = RankShuffle(p.n_experts, shift, phase_rng).apply(ranking_[l]);
      for (const auto& ranked : {generated, prefill_view.apply(generated)}) {
        std::vector<uint32_t> rank_of(p.n_experts);
        for (uint32_t r = 0; r < p.n_experts; ++r) rank_of[ranked[r]] = r;
        mix.rank_of.push_back(std::move(rank_of));
      }
      mix.weight.push_back((1 - prefill_fraction) / p.phases);
      mix.weight.push_back(prefill_fraction / p.phases);
    }
    const double offset = p.head_offset * hot_count_[l];
    exponent_.push_back(calibrate_exponent(mix, p.top_k, offset, hot_count_[l], p.hot_share));

    // Step 5.
    const std::vector<double> weight_by_rank = zipf_weights(p.n_experts, exponent_[l], offset);
    for (const auto& rank_of : mix.rank_of) {
      std::vector<double> cumulative(p.n_experts);
      double sum = 0;
      for (uint32_t e = 0; e < p.n_experts; ++e) cumulative[e] = sum += weight_by_rank[rank_of[e]];
      cumulative_.push_back(std::move(cumulative));
    }
  }
}

}  // namespace frank::experts
