#pragma once
// The three-way verdict: the design's rule applied to the primary estimand, then the guards.
//
// Rules ("improvement" is the effect turned so that positive is better):
//  - all_blocks_better: adopt if every block improved; reject if none did; else inconclusive.
//  - sign_test / permutation: adopt if the one-sided p for "better" is <= alpha; reject if the
//    one-sided p for "worse" is <= alpha; else inconclusive.
//  - bands, with x = expected_improvement and the 95% interval [lo, hi] of the mean improvement:
//      carried   lo >= adopt_if_lower_at_least * x   -> adopt
//      excluded  hi <  reject_if_upper_below * x     -> reject (the gain is shown to be smaller)
//      seen      lo > 0 (but not carried)            -> inconclusive
//      unclear   anything else                       -> inconclusive
//    (the design refuses overlapping bands, so carried and excluded cannot both hold).
// Guards, after the rule: a failed drift guard makes any verdict inconclusive (the measurement
// itself is in doubt); otherwise a failed quality guard turns adopt into reject.
#include <optional>
#include <string>
#include <vector>

#include "frank/lab/design.h"
#include "frank/lab/effect_summary.h"
#include "frank/lab/guards.h"

namespace frank::lab {

enum class Verdict { Adopt, Reject, Inconclusive };
const char* to_string(Verdict v);

struct RuleOutcome {
  Verdict verdict = Verdict::Inconclusive;
  std::string reason;
  std::string band;  // bands only: carried, excluded, seen or unclear
};

RuleOutcome apply_rule(const DecisionRule& rule, Better better, const EffectSummary& primary);

struct FinalVerdict {
  Verdict verdict = Verdict::Inconclusive;
  std::string reason;
};

FinalVerdict apply_guards(const RuleOutcome& rule, const std::optional<DriftCheck>& drift,
                          const std::vector<QualityCheck>& quality);

}  // namespace frank::lab
