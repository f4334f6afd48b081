#include "frank/engine/mtp_drafter.h"

#include <fmt/format.h>

#include "frank/core/error.h"
#include "frank/engine/sampling.h"

namespace frank::engine {

MtpDrafter::MtpDrafter(const Model& model)
    : model_(model),
      block_(model.config(), model.weights(), model.main_rope(), model.compress_rope()),
      state_(block_.new_state()) {}

void MtpDrafter::observe(const Tensor& streams, int64_t first, int64_t rows) {
  if (streams.rows() != rows) throw Error("MTP drafter: the main model's streams were not given");
  if (!streams_.empty() && first != streams_first_ + static_cast<int64_t>(streams_.size()))
    throw Error(fmt::format("MTP drafter: streams of position {} arrive after position {}", first,
                            streams_first_ + static_cast<int64_t>(streams_.size())));
  if (streams_.empty()) streams_first_ = first;
  for (int64_t r = 0; r < streams.rows(); ++r) streams_.emplace_back(streams.row(r), streams.row(r) + streams.cols());
  // The next slots attend at most sliding_window positions back.
  while (static_cast<int64_t>(streams_.size()) > model_.config().sliding_window) {
    streams_.pop_front();
    ++streams_first_;
  }
}

std::vector<Draft> MtpDrafter::propose(std::span<const int32_t> tokens, int k) {
  if (k <= 0) return {};
  const int64_t next_position = static_cast<int64_t>(tokens.size()) - 1;  // where the verify step's first token goes
  const int64_t width = int64_t{model_.config().hc_mult} * model_.config().hidden_size;
  // Catch up: slots up to next_position - 1 read the main model's own streams.
  if (state_.position < streams_first_) state_.position = streams_first_;  // earlier slots are out of every window
  const int64_t last_slot = next_position - 1;
  if (last_slot < state_.position || last_slot >= streams_first_ + static_cast<int64_t>(streams_.size()))
    throw Error("MTP drafter: the main model's streams of the last position are missing");
  const int64_t n = last_slot - state_.position + 1;
  Tensor h({n, width});
  for (int64_t r = 0; r < n; ++r) {
    const auto& row = streams_[static_cast<size_t>(state_.position + r - streams_first_)];
    std::copy(row.begin(), row.end(), h.row(r));
  }
  MtpBlock::Output out = block_.forward(state_, h, tokens.subspan(static_cast<size_t>(state_.position + 1), n));

  // Draft 1 from the last true slot; then chain on the block's own streams, and undo the chain.
  std::vector<Draft> drafts;
  const LayerState kept = state_.layer;
  const int64_t kept_position = state_.position;
  Tensor last_streams({1, width}, std::vector<float>(out.streams.row(n - 1), out.streams.row(n - 1) + width));
  std::span<const float> logits(out.logits.row(n - 1), static_cast<size_t>(out.logits.cols()));
  while (true) {
    drafts.push_back({argmax(logits), {}});
    if (static_cast<int>(drafts.size()) == k) break;
    const int32_t previous = drafts.back().token;
    out = block_.forward(state_, last_streams, std::span<const int32_t>(&previous, 1));
    last_streams = std::move(out.streams);
    logits = std::span<const float>(out.logits.row(0), static_cast<size_t>(out.logits.cols()));
  }
  state_.layer = kept;
  state_.position = kept_position;
  return drafts;
}

}  // namespace frank::engine
