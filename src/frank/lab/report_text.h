#pragma once
// The wording of an analysis that the text report (report.h) and the HTML report (html_report.h)
// share, so that both say the same thing in the same words.
#include <string>

#include "frank/lab/design.h"
#include "frank/lab/effect_summary.h"
#include "frank/lab/guards.h"

namespace frank::lab {

std::string signed_percent(double fraction);                       // "+1.23%"; "n/a" for NaN
std::string interval_text(const MeanInterval& interval);           // "[-1.00%, +2.00%]" or "no interval ..."
std::string rule_text(const DecisionRule& rule);                   // "sign test, alpha 0.05"
std::string mean_effect_text(const EffectSummary& summary);        // "-10.00%  95% CI [...] (t-interval ...)"
std::string sign_test_text(const SignTest& sign);                  // "3 better, 0 worse, 0 tied: p = ..."
std::string permutation_text(const PermutationTest& permutation);  // "p = ... (one-sided, better; exact ...)"
std::string drift_text(const DriftCheck& drift);                   // "pass: mean drift ..., margin ..."
std::string quality_text(const QualityCheck& quality);             // "FAIL: mean worsening ... (absolute)"

}  // namespace frank::lab
