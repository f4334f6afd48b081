#pragma once
// Within-block permutation test of the mean relative effect.
//
// Inside a block the arms were started in random order, so under "the arms do not differ" the
// arm labels of the block's starts are exchangeable: any `t` of its n starts could have been the
// treatment (t = its treatment starts; with one start per arm, a swap of the two labels). The
// statistic is the mean over blocks of treatment/baseline - 1; its distribution over all
// assignments of labels is the null distribution.
//  - Up to kMaxExactAssignments assignments are enumerated: p = (assignments at least as extreme) / all.
//  - Above, `monte_carlo_samples` assignments are drawn uniformly (each block independently) from
//    SplitMix64 seeded with `seed`, and p = (1 + hits) / (1 + samples) (Phipson & Smyth 2010), which
//    is never below the exact p in expectation and never 0.
// "At least as extreme" allows a relative tolerance of 1e-11 of the statistic's scale, so that an
// assignment equal to the observed one in exact arithmetic counts whatever order it was summed in.
#include <cstdint>
#include <vector>

#include "frank/lab/block_starts.h"
#include "frank/lab/design.h"

namespace frank::lab {

struct PermutationTest {
  double p_better = 1.0;  // one-sided: the treatment improves the metric (in the design's direction)
  double p_worse = 1.0;   // one-sided: the treatment makes it worse
  double assignments = 1.0;
  bool exact = true;
  int64_t samples = 0;  // Monte Carlo assignments drawn; 0 when exact
};

PermutationTest permutation_test(const std::vector<BlockStarts>& blocks, Better better, int64_t monte_carlo_samples,
                                 uint64_t seed);

}  // namespace frank::lab
