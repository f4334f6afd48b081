#include "frank/lab/effect_summary.h"

#include <fmt/format.h>

#include "frank/core/error.h"

namespace frank::lab {

EffectSummary summarize_effects(const std::vector<BlockStarts>& blocks, Better better, int64_t monte_carlo_samples,
                                uint64_t seed, std::string estimand) {
  EffectSummary s;
  s.estimand = std::move(estimand);
  std::vector<double> effects, improvements;
  for (const BlockStarts& b : blocks) {
    for (const auto* starts : {&b.baseline, &b.treatment})
      for (const StartTotal& start : *starts)
        if (!(start.sum > 0.0))
          throw Error(
              fmt::format("block {}: a start's mean ({}) is not positive; relative effects need positive "
                          "values ({} metric)",
                          b.block, start.sum / double(start.draws), s.estimand));
    BlockEffect e{b.block,   b.baseline_value(), b.treatment_value(), b.baseline_draws(), b.treatment_draws(),
                  b.effect()};
    s.blocks.push_back(e);
    effects.push_back(e.effect);
    improvements.push_back(improvement(e.effect, better));
  }
  s.ci95 = t_interval(effects, 0.95);
  s.mean_effect = s.ci95.mean;
  s.sign = sign_test(improvements);
  s.permutation = permutation_test(blocks, better, monte_carlo_samples, seed);
  return s;
}

}  // namespace frank::lab
