#include "frank/server/continued_sessions.h"

#include <algorithm>

#include "frank/core/error.h"

namespace frank::server {

int64_t ContinuedSessions::open(std::span<const int32_t> prompt) {
  // At least one prompt token must run: its logits start the completion.
  const bool continues = runner_ != nullptr && consumed_.size() < prompt.size() &&
                         std::equal(consumed_.begin(), consumed_.end(), prompt.begin());
  if (!continues) {
    runner_.reset();  // free the old session's memory before the new one takes its own
    consumed_.clear();
    runner_ = new_runner_();
  }
  return static_cast<int64_t>(consumed_.size());
}

Tensor ContinuedSessions::forward(std::span<const int32_t> ids, Tensor* streams) {
  if (streams != nullptr) throw Error("this backend does not return residual streams (no speculative decoding)");
  Tensor logits = runner_->forward(ids, engine::Model::Logits::Last);
  consumed_.insert(consumed_.end(), ids.begin(), ids.end());
  return logits;
}

void ContinuedSessions::drop() {
  runner_.reset();
  consumed_.clear();
}

}  // namespace frank::server
