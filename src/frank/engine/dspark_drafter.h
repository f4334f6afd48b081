#pragma once
// Drafting with V4.1's DSpark drafter (dspark.h) over the CPU reference target: observe() takes the
// target features of the positions the target kept from its last call (CpuV41VerifyTarget made
// with_features) into the context rings; propose() drafts the block at the anchor p = the last
// kept position, first token = the one the verify step feeds first. Only kept positions ever enter
// the rings; when the target is rewound further after a step (rewind_to), the rings are restored to
// before that step's rows and the still-kept rows are written again.
#include <cstdint>
#include <vector>

#include "frank/engine/dspark.h"
#include "frank/engine/speculative.h"
#include "frank/engine/v41_verify_target.h"

namespace frank::engine {

class DSparkDrafter : public Drafter {
 public:
  // `target` must have been made with_features and outlive the drafter.
  DSparkDrafter(const V41Model& model, const CpuV41VerifyTarget& target);

  bool reads_host_streams() const override { return false; }
  void observe(const Tensor& streams, int64_t first, int64_t rows) override;
  std::vector<Draft> propose(std::span<const int32_t> tokens, int k) override;
  void rewind_to(int64_t position) override;

  const DSparkState& state() const { return state_; }

 private:
  DSpark dspark_;
  const CpuV41VerifyTarget& target_;
  DSparkState state_;
  DSparkState before_;  // the rings before the last observe()
  Tensor observed_;     // the features the last observe() wrote
};

}  // namespace frank::engine
