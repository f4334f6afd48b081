#include "frank/lab/permutation_test.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "frank/core/error.h"
#include "frank/lab/minimum_p.h"
#include "frank/lab/random.h"

namespace frank::lab {
namespace {

// The block's effect under every way of giving the treatment label to as many of its starts as
// it really had; observed_index is the real assignment.
struct BlockOptions {
  std::vector<double> effects;
  size_t observed_index = 0;
};

BlockOptions block_options(const BlockStarts& b) {
  std::vector<StartTotal> pooled = b.baseline;
  pooled.insert(pooled.end(), b.treatment.begin(), b.treatment.end());
  const int n = static_cast<int>(pooled.size());
  const int treated = static_cast<int>(b.treatment.size());
  if (n > 16) throw Error(fmt::format("block {}: more than 16 starts cannot be permuted", b.block));
  const uint32_t observed_mask = ((1u << treated) - 1) << b.baseline.size();
  BlockOptions options;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    if (std::popcount(mask) != treated) continue;
    StartTotal t, base;
    for (int i = 0; i < n; ++i) {
      StartTotal& into = (mask >> i & 1) ? t : base;
      into.sum += pooled[i].sum;
      into.draws += pooled[i].draws;
    }
    if (mask == observed_mask) options.observed_index = options.effects.size();
    options.effects.push_back((t.sum / double(t.draws)) / (base.sum / double(base.draws)) - 1.0);
  }
  return options;
}

// Counts assignments whose summed effect is at or beyond the observed sum on each side.
struct Tally {
  double observed = 0.0, tolerance = 0.0;
  uint64_t at_or_below = 0, at_or_above = 0;
  void add(double sum) {
    at_or_below += sum <= observed + tolerance;
    at_or_above += sum >= observed - tolerance;
  }
};

// Depth-first over blocks; every full assignment is summed in block order, like the observed one.
void enumerate(const std::vector<BlockOptions>& options, size_t block, double partial, Tally& tally) {
  if (block == options.size()) return tally.add(partial);
  for (double e : options[block].effects) enumerate(options, block + 1, partial + e, tally);
}

}  // namespace

PermutationTest permutation_test(const std::vector<BlockStarts>& blocks, Better better, int64_t monte_carlo_samples,
                                 uint64_t seed) {
  if (blocks.empty()) throw Error("the permutation test needs at least one block");
  std::vector<BlockOptions> options;
  Tally tally;
  double scale = 0.0;
  PermutationTest r;
  for (const BlockStarts& b : blocks) {
    options.push_back(block_options(b));
    const auto& effects = options.back().effects;
    tally.observed += effects[options.back().observed_index];
    scale += std::abs(*std::max_element(effects.begin(), effects.end(),
                                        [](double x, double y) { return std::abs(x) < std::abs(y); }));
    r.assignments *= double(effects.size());
  }
  tally.tolerance = 1e-11 * scale;

  double total = r.assignments;
  if (r.assignments <= kMaxExactAssignments) {
    enumerate(options, 0, 0.0, tally);
  } else {
    r.exact = false;
    r.samples = monte_carlo_samples;
    SplitMix64 rng(seed);
    for (int64_t s = 0; s < monte_carlo_samples; ++s) {
      double sum = 0.0;
      for (const BlockOptions& o : options) sum += o.effects[uniform_below(o.effects.size(), rng)];
      tally.add(sum);
    }
    // The observed assignment counts as one of the draws on both sides.
    ++tally.at_or_below;
    ++tally.at_or_above;
    total = double(monte_carlo_samples + 1);
  }
  const double p_low = double(tally.at_or_below) / total;
  const double p_high = double(tally.at_or_above) / total;
  r.p_better = better == Better::Lower ? p_low : p_high;
  r.p_worse = better == Better::Lower ? p_high : p_low;
  return r;
}

}  // namespace frank::lab
