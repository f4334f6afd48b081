#pragma once
// Draws grouped the way the design randomized them: per block, per arm, per engine start.
// An arm's value in a block is the mean over all its draws there (the mean of its starts' means
// when, as designed, every start has the same number of draws).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frank/lab/row.h"

namespace frank::lab {

struct StartTotal {
  double sum = 0.0;  // of the draws' values
  int64_t draws = 0;
};

struct BlockStarts {
  int64_t block = 0;
  std::vector<StartTotal> baseline, treatment;

  double baseline_value() const;
  double treatment_value() const;
  int64_t baseline_draws() const;
  int64_t treatment_draws() const;
  double effect() const { return treatment_value() / baseline_value() - 1.0; }  // relative
  double difference() const { return treatment_value() - baseline_value(); }    // absolute
};

// Blocks in ascending order. Rows of other arms are ignored; `value_of` gives each draw's value
// (the raw metric, or its covariate-adjusted form).
std::vector<BlockStarts> group_blocks(const std::vector<Row>& rows, const std::string& baseline,
                                      const std::string& treatment, const std::function<double(const Row&)>& value_of);

}  // namespace frank::lab
