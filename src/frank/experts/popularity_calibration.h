#pragma once
// Expert popularity for the synthetic trace generator (docs/trace-generator.md): Zipf-Mandelbrot
// weights by rank, and the exponent that makes a layer's hottest experts receive a target share
// of routings.
//
// A token picks top_k distinct experts. The generator draws them by successive sampling (draw by
// weight, redraw a repeat), under which an expert's chance to be among a token's picks is not
// proportional to its weight: the hottest saturate near 1. Rosén's approximation for successive
// sampling gives the inclusion probabilities:
//   pi_i = 1 - exp(-lambda * w_i),  with lambda chosen so that sum_i pi_i = top_k,
// and the share of routings expert i receives is pi_i / top_k. Calibration solves for the Zipf
// exponent on these shares, so the realised routings (not the weights) hit the target.
#include <cstdint>
#include <vector>

namespace frank::experts {

// w_r = (r + 1 + offset)^-exponent for ranks r = 0 .. n-1 (offset 0: Zipf's law; a positive
// offset flattens the head).
std::vector<double> zipf_weights(uint32_t n, double exponent, double offset);

// pi_i as above; the weights need not be normalised. Requires top_k <= weights.size().
std::vector<double> inclusion_probabilities(const std::vector<double>& weights, uint32_t top_k);

// Traffic that follows ranking i a fraction weight[i] of the time (the weights sum to 1):
// ranking i puts expert e at rank rank_of[i][e].
struct RankingMix {
  std::vector<std::vector<uint32_t>> rank_of;
  std::vector<double> weight;
};

// The expected routing share of the hottest `hot_count` experts (fractional: the last one counts
// in part) when rank r has weight zipf_weights(n, exponent, offset)[r] in every ranking of the mix.
double hottest_share(const RankingMix& mix, uint32_t top_k, double exponent, double offset, double hot_count);

// The exponent for which hottest_share(...) == hot_share, by bisection on [0, 64] (the share grows
// with the exponent). Throws frank::Error when the target cannot be reached.
double calibrate_exponent(const RankingMix& mix, uint32_t top_k, double offset, double hot_count, double hot_share);

}  // namespace frank::experts
