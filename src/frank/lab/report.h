#pragma once
// Readable text for people: what `frank lab register` and `frank lab analyze` print.
#include <optional>
#include <string>

#include "frank/lab/analysis.h"
#include "frank/lab/design.h"
#include "frank/lab/power.h"
#include "frank/lab/registration.h"

namespace frank::lab {

std::string registration_report(const Design& design, const Registration& registration,
                                const std::optional<NoiseEstimate>& noise);
std::string analysis_report(const Design& design, const Analysis& analysis);

}  // namespace frank::lab
