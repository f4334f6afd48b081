#pragma once
// Drafting with V4.1's DSpark drafter (dsv41-model.md §8) over a target that keeps the features of
// its last call, for any backend: observe() takes the target features of the positions the target
// kept from its last call into the context rings; propose() drafts the block at the anchor p = the
// last kept position, first token = the one the verify step feeds first. Only kept positions ever
// enter the rings; when the target is rewound further after a step (rewind_to), the rings are
// restored to before that step's rows and the still-kept rows are written again.
//
// Backend names the types and the two calls that differ between backends:
//   Model, DSpark (new_state, observe(state, features), draft(state, first).tokens), State (copyable),
//   Features (the feature rows), Target (last_features_start());
//   static const Features& features(const Target&)            the target's last call's features
//   static Features first_rows(const DSpark&, const Features&, int64_t n)   a copy of rows [0, n)
// (dspark_drafter.h: the CPU reference; cuda/cuda_dspark_drafter.h: the GPU).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "frank/core/error.h"
#include "frank/engine/speculative.h"

namespace frank::engine {

template <class Backend>
class BasicDSparkDrafter : public Drafter {
 public:
  using DSpark = typename Backend::DSpark;
  using State = typename Backend::State;
  using Features = typename Backend::Features;
  using Target = typename Backend::Target;

  // `target` must outlive the drafter.
  BasicDSparkDrafter(typename Backend::Model& model, const Target& target)
      : dspark_(model), target_(target), state_(dspark_.new_state()) {}

  bool reads_host_streams() const override { return false; }

  void observe(const Tensor&, int64_t first, int64_t rows) override {
    const Features& features = Backend::features(target_);
    if (first != state_.position || first != target_.last_features_start() || rows < 0 || rows > features.rows())
      throw Error(fmt::format("DSpark drafter: positions {}..{} are not the target's last call's kept rows (it has "
                              "context up to {}; the last call has {} feature rows from {})",
                              first, first + rows - 1, state_.position, features.rows(),
                              target_.last_features_start()));
    before_ = state_;
    observed_ = Backend::first_rows(dspark_, features, rows);
    dspark_.observe(state_, observed_);
  }

  void rewind_to(int64_t position) override {
    if (position >= state_.position) return;
    if (position < before_.position)
      throw Error(fmt::format("DSpark drafter: cannot go back to {} (its last rows start at {})", position,
                              before_.position));
    state_ = before_;
    observed_ = Backend::first_rows(dspark_, observed_, position - before_.position);
    dspark_.observe(state_, observed_);
  }

  std::vector<Draft> propose(std::span<const int32_t> tokens, int k) override {
    // The verify step feeds tokens.back() at position tokens.size() - 1: the rings must hold every
    // position before it.
    if (state_.position != static_cast<int64_t>(tokens.size()) - 1)
      throw Error(fmt::format("DSpark drafter: it has context up to position {}, the next token goes to {}",
                              state_.position, tokens.size() - 1));
    const auto d = dspark_.draft(state_, tokens.back());
    std::vector<Draft> out;
    for (int j = 0; j < std::min<int>(k, static_cast<int>(d.tokens.size())); ++j) out.push_back({d.tokens[j], {}});
    return out;
  }

  const State& state() const { return state_; }

 private:
  DSpark dspark_;
  const Target& target_;
  State state_;
  State before_;       // the rings before the last observe()
  Features observed_;  // the features the last observe() wrote
};

}  // namespace frank::engine
