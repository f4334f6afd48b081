#pragma once
// Drafting with the model's own MTP block (DeepSeek's convention, dsv4-model.md §7). Before each
// verify step the block catches up on the positions the main model has kept: slot t reads the
// main streams H_t and token t+1. The last slot's prediction is the first draft; each further
// draft chains the block on its own output streams and the previous draft. The chained slots are
// then undone (their window rows restored), so the block's state only ever holds slots computed
// from the main model's streams. Only the last sliding_window positions matter to the next slot,
// so older streams are dropped and a long prompt's early slots are skipped.
#include <cstdint>
#include <deque>
#include <vector>

#include "frank/engine/mtp.h"
#include "frank/engine/speculative.h"

namespace frank::engine {

class MtpDrafter : public Drafter {
 public:
  explicit MtpDrafter(const Model& model);

  void observe(const Tensor& streams, int64_t first, int64_t rows) override;
  std::vector<Draft> propose(std::span<const int32_t> tokens, int k) override;

 private:
  const Model& model_;
  MtpBlock block_;
  MtpState state_;
  std::deque<std::vector<float>> streams_;  // main streams of positions streams_first_ ..
  int64_t streams_first_ = 0;
};

}  // namespace frank::engine
