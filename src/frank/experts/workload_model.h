#pragma once
// What a synthetic workload's routing looks like, layer by layer (docs/trace-generator.md):
//   1. the model's base ranking of each layer's experts, the same for every workload (seeded by
//      the model fingerprint);
//   2. the workload's ranking: a hot set of hot_count(l) experts, the first overlap * hot_count of
//      the base ranking plus experts of the workload's own choosing, in a workload-specific order,
//      then the remaining experts in a workload-specific order;
//   3. per phase, that ranking with a random phase_shift of its ranks permuted among themselves;
//   4. for prefill tokens, each phase's ranking with a further prefill_shift of its ranks permuted
//      (the same ranks and permutation in every phase: prompt text routes differently from
//      generated text, whatever the sub-task);
//   5. Zipf-Mandelbrot weights by rank, w_r = (r + 1 + head_offset * hot_count(l))^-s, with the
//      layer's exponent s calibrated (popularity_calibration.h) so that the hottest hot_count(l)
//      experts receive hot_share of the layer's routings, averaged over the phases and over prefill
//      and generated tokens in their expected proportion.
// hot_count(l) = hot_fraction * n_experts scaled by the depth gradient: geometric in depth from
// layer 0 to the last layer, ratio depth_gradient, with mean hot_fraction * n_experts.
#include <cstdint>
#include <vector>

#include "frank/experts/generator_params.h"

namespace frank::experts {

class WorkloadModel {
 public:
  explicit WorkloadModel(const GeneratorParams& params);  // throws frank::Error on bad parameters

  uint32_t phases() const { return phases_; }
  double hot_count(uint32_t layer) const { return hot_count_[layer]; }
  double exponent(uint32_t layer) const { return exponent_[layer]; }
  // Rank -> expert of the workload before phase shifts; its first round(hot_count) are the hot set.
  const std::vector<uint16_t>& ranking(uint32_t layer) const { return ranking_[layer]; }
  // Running sums of the routing weights over expert ids 0..n-1 of a layer in a phase, for prefill
  // or generated tokens.
  const std::vector<double>& cumulative_weights(uint32_t layer, uint32_t phase, bool prefill) const {
    return cumulative_[(size_t{layer} * phases_ + phase) * 2 + prefill];
  }

 private:
  uint32_t phases_;
  std::vector<double> hot_count_, exponent_;
  std::vector<std::vector<uint16_t>> ranking_;
  std::vector<std::vector<double>> cumulative_;  // [(layer * phases + phase) * 2 + prefill]
};

}  // namespace frank::experts
