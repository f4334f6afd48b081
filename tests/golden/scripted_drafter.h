#pragma once
// A drafter for speculative-decoding tests: proposes a known continuation, wrong where
// `wrong(position)` says so (the next token id instead), so every acceptance pattern can be made.
// It reads no streams; `host_streams` says whether it asks its target for them anyway (V4 targets
// give them, so the decoder's streams path runs; the V4.1 target gives none).
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "frank/engine/speculative.h"

namespace frank::test {

class ScriptedDrafter : public engine::Drafter {
 public:
  ScriptedDrafter(std::vector<int32_t> reference, int vocab, std::function<bool(size_t)> wrong,
                  bool host_streams = true)
      : reference_(std::move(reference)), vocab_(vocab), wrong_(std::move(wrong)), host_streams_(host_streams) {}
  bool reads_host_streams() const override { return host_streams_; }
  std::vector<engine::Draft> propose(std::span<const int32_t> tokens, int k) override {
    std::vector<engine::Draft> out;
    for (size_t at = tokens.size(); at < tokens.size() + static_cast<size_t>(k) && at < reference_.size(); ++at)
      out.push_back({wrong_(at) ? (reference_[at] + 1) % vocab_ : reference_[at], {}});
    return out;
  }

 private:
  std::vector<int32_t> reference_;
  int vocab_;
  std::function<bool(size_t)> wrong_;
  bool host_streams_;
};

// The drafters every greedy test runs: all right, all wrong, and a mix.
inline std::vector<std::pair<const char*, std::function<bool(size_t)>>> scripted_drafters() {
  return {
      {"right", [](size_t) { return false; }},
      {"wrong", [](size_t) { return true; }},
      {"mixed", [](size_t at) { return at % 3 == 0 || at % 7 == 0; }},
  };
}

}  // namespace frank::test
