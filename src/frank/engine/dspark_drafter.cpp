#include "frank/engine/dspark_drafter.h"

#include <fmt/format.h>

#include <algorithm>

#include "frank/core/error.h"

namespace frank::engine {
namespace {

// Rows [0, n) of x.
Tensor first_rows(const Tensor& x, int64_t n) {
  return Tensor({n, x.cols()}, std::vector<float>(x.data.begin(), x.data.begin() + n * x.cols()));
}

}  // namespace

DSparkDrafter::DSparkDrafter(const V41Model& model, const CpuV41VerifyTarget& target)
    : dspark_(model), target_(target), state_(dspark_.new_state()) {}

void DSparkDrafter::observe(const Tensor&, int64_t first, int64_t rows) {
  const Tensor& features = target_.last_features();
  if (first != state_.position || first != target_.last_features_start() || rows > features.rows())
    throw Error(fmt::format("DSpark drafter: positions {}..{} are not the target's last call's kept rows (it has "
                            "context up to {}; the last call has {} feature rows from {})",
                            first, first + rows - 1, state_.position, features.rows(),
                            target_.last_features_start()));
  before_ = state_;
  observed_ = first_rows(features, rows);
  dspark_.observe(state_, observed_);
}

void DSparkDrafter::rewind_to(int64_t position) {
  if (position >= state_.position) return;
  if (position < before_.position)
    throw Error(fmt::format("DSpark drafter: cannot go back to {} (its last rows start at {})", position,
                            before_.position));
  state_ = before_;
  observed_ = first_rows(observed_, position - before_.position);
  dspark_.observe(state_, observed_);
}

std::vector<Draft> DSparkDrafter::propose(std::span<const int32_t> tokens, int k) {
  // The verify step feeds tokens.back() at position tokens.size() - 1: the rings must hold every
  // position before it.
  if (state_.position != static_cast<int64_t>(tokens.size()) - 1)
    throw Error(fmt::format("DSpark drafter: it has context up to position {}, the next token goes to {}",
                            state_.position, tokens.size() - 1));
  const DSparkDraft d = dspark_.draft(state_, tokens.back());
  std::vector<Draft> out;
  for (int j = 0; j < std::min<int>(k, static_cast<int>(d.tokens.size())); ++j) out.push_back({d.tokens[j], {}});
  return out;
}

}  // namespace frank::engine
