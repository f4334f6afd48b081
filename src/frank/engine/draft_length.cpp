#include "frank/engine/draft_length.h"

#include <fmt/format.h>

#include "frank/core/error.h"

namespace frank::engine {

DraftLengthChooser::DraftLengthChooser(int max_draft_tokens, int explore_every)
    : max_(max_draft_tokens),
      explore_every_(explore_every),
      attempts_(static_cast<size_t>(max_draft_tokens) + 1, 0.0),
      successes_(static_cast<size_t>(max_draft_tokens) + 1, 0.0),
      seconds_(static_cast<size_t>(max_draft_tokens) + 1, 0.0),
      measured_(static_cast<size_t>(max_draft_tokens) + 1, 0) {
  if (max_draft_tokens < 1 || explore_every < max_draft_tokens + 1)
    throw Error(fmt::format("draft length chooser: max {} and exploration period {} do not fit", max_draft_tokens,
                            explore_every));
}

double DraftLengthChooser::expected_tokens(int k) const {
  double expected = 1.0, reach = 1.0;
  for (int i = 1; i <= k; ++i) {
    reach *= (successes_[static_cast<size_t>(i)] + 1.0) / (attempts_[static_cast<size_t>(i)] + 2.0);
    expected += reach;
  }
  return expected;
}

double DraftLengthChooser::step_seconds(int k) const { return seconds_[static_cast<size_t>(k)]; }

int DraftLengthChooser::next() {
  const int64_t step = steps_++;
  // Try every k first, then one k in turn every explore_every steps.
  for (int k = 0; k <= max_; ++k)
    if (measured_[static_cast<size_t>(k)] == 0) return k;
  if (step % explore_every_ == 0) return static_cast<int>((step / explore_every_) % (max_ + 1));
  int best = 0;
  double best_rate = 0.0;
  for (int k = 0; k <= max_; ++k) {
    const double rate = expected_tokens(k) / seconds_[static_cast<size_t>(k)];
    if (rate > best_rate) best = k, best_rate = rate;
  }
  return best;
}

void DraftLengthChooser::observe(int k, int accepted, double seconds) {
  if (k < 0 || k > max_ || accepted < 0 || accepted > k || !(seconds > 0))
    throw Error(fmt::format("draft length chooser: a step of k = {} accepting {} in {} s", k, accepted, seconds));
  // Draft i was attempted when the i-1 before it were accepted.
  for (int i = 1; i <= k && i <= accepted + 1; ++i) {
    attempts_[static_cast<size_t>(i)] += 1;
    if (i <= accepted) successes_[static_cast<size_t>(i)] += 1;
  }
  auto& n = measured_[static_cast<size_t>(k)];
  auto& mean = seconds_[static_cast<size_t>(k)];
  ++n;
  // A running mean over the last ~32 steps of this k: costs drift, so old steps fade.
  mean += (seconds - mean) / static_cast<double>(std::min<int64_t>(n, 32));
}

}  // namespace frank::engine
