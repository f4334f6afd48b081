#pragma once
// Exact sign test over blocks: under "no difference" each block is equally likely to favour either
// arm, so the number of blocks that improved is Binomial(n, 1/2), n = blocks that did not tie.
// Ties (effect exactly 0) carry no sign and are dropped, the usual convention (scipy's binomtest
// on the non-tied blocks gives the same p).
#include <cstdint>
#include <vector>

namespace frank::lab {

struct SignTest {
  int64_t better = 0, worse = 0, ties = 0;
  double p_better = 1.0;  // one-sided: P(X >= better), the evidence that the treatment improves
  double p_worse = 1.0;   // one-sided: P(X >= worse), the evidence that it makes things worse
};

// `improvements`: per block, > 0 where the treatment was better (in the metric's direction).
SignTest sign_test(const std::vector<double>& improvements);

}  // namespace frank::lab
