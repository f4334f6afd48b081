#pragma once
// `--draft-tokens auto`: how many tokens to draft per verify step, chosen from measured costs.
// A verify step drafting k tokens emits E(k) = 1 + sum_{i<=k} prod_{j<=i} c_j tokens on average,
// where c_j is the measured rate at which draft j is accepted given that draft j-1 was (with one
// success and one failure as a prior), and takes t(k) seconds (a running mean per k). The chooser
// picks the k with the most tokens per second, E(k) / t(k). It first tries every k once, and keeps
// trying each k every `explore_every` steps so that changed costs (a warmer cache, another
// machine's load, experts moving home) are noticed.
#include <cstdint>
#include <vector>

namespace frank::engine {

class DraftLengthChooser {
 public:
  // The most `auto` drafts for a model: 4 (DeepSeek trains one MTP layer; long chains rarely pay),
  // and fewer than the sliding window (a verify step is rewound within it).
  static int auto_limit(int sliding_window) { return sliding_window - 1 < 4 ? sliding_window - 1 : 4; }

  explicit DraftLengthChooser(int max_draft_tokens, int explore_every = 64);

  int next();  // the k for the next verify step, 0..max
  // A verify step that drafted k tokens, accepted `accepted` of them and took `seconds`.
  void observe(int k, int accepted, double seconds);

  double expected_tokens(int k) const;
  double step_seconds(int k) const;  // 0 while unmeasured
  int max_draft_tokens() const { return max_; }

 private:
  int max_, explore_every_;
  int64_t steps_ = 0;
  std::vector<double> attempts_, successes_;  // per draft position 1..max (index 0 unused)
  std::vector<double> seconds_;               // running mean per k
  std::vector<int64_t> measured_;             // steps per k
};

}  // namespace frank::engine
