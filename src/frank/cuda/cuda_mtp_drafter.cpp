#include "frank/cuda/cuda_mtp_drafter.h"

#include <fmt/format.h>

#include <algorithm>

#include "frank/core/error.h"

namespace frank::cuda {
namespace {

// Rows [first, first + n) of a into a new array.
DeviceArray<float> rows_of(const DeviceArray<float>& a, int64_t first, int64_t n, cudaStream_t stream) {
  DeviceArray<float> out({n, a.cols()}, stream);
  if (n > 0)
    check(cudaMemcpyAsync(out.data(), a.data() + first * a.cols(), out.bytes(), cudaMemcpyDeviceToDevice, stream),
          "MTP drafter (copy streams)");
  return out;
}

}  // namespace

CudaMtpDrafter::CudaMtpDrafter(CudaModel& model, const DeviceArray<float>& target_streams)
    : model_(model), target_streams_(target_streams), block_(model), state_(block_.new_state()) {}

void CudaMtpDrafter::observe(const Tensor&, int64_t first, int64_t rows) {
  const cudaStream_t stream = model_.stream();
  const int64_t have = streams_.rows();
  if (have > 0 && first != streams_first_ + have)
    throw Error(fmt::format("MTP drafter: streams of position {} arrive after position {}", first,
                            streams_first_ + have));
  if (rows < 0 || rows > target_streams_.rows())
    throw Error(fmt::format("MTP drafter: {} rows of streams observed, the target's last call left {}", rows,
                            target_streams_.rows()));
  if (have == 0) streams_first_ = first;
  // Keep the last sliding_window rows of what was kept and the new rows.
  const int64_t window = model_.model().config().sliding_window;
  const int64_t total = have + rows, keep = std::min(total, window), drop = total - keep;
  const int64_t width = int64_t{model_.model().config().hc_mult} * model_.model().config().hidden_size;
  DeviceArray<float> kept({keep, width}, stream);
  const int64_t old_rows = std::max<int64_t>(0, have - drop), new_rows = keep - old_rows;
  if (old_rows > 0)
    check(cudaMemcpyAsync(kept.data(), streams_.data() + (have - old_rows) * width,
                          static_cast<size_t>(old_rows * width) * sizeof(float), cudaMemcpyDeviceToDevice, stream),
          "MTP drafter (keep streams)");
  if (new_rows > 0)
    check(cudaMemcpyAsync(kept.data() + old_rows * width, target_streams_.data() + (rows - new_rows) * width,
                          static_cast<size_t>(new_rows * width) * sizeof(float), cudaMemcpyDeviceToDevice, stream),
          "MTP drafter (observe streams)");
  streams_ = std::move(kept);
  streams_first_ += drop;
}

std::vector<engine::Draft> CudaMtpDrafter::propose(std::span<const int32_t> tokens, int k) {
  if (k <= 0) return {};
  const cudaStream_t stream = model_.stream();
  const int64_t vocab = model_.model().config().vocab_size;
  const int64_t next_position = std::ssize(tokens) - 1;  // where the verify step's first token goes
  // Catch up: slots up to next_position - 1 read the main model's own streams.
  if (state_.position < streams_first_) state_.position = streams_first_;  // earlier slots are out of every window
  const int64_t last_slot = next_position - 1;
  if (last_slot < state_.position || last_slot >= streams_first_ + streams_.rows())
    throw Error("MTP drafter: the main model's streams of the last position are missing");
  const int64_t n = last_slot - state_.position + 1;
  DeviceArray<float> h = rows_of(streams_, state_.position - streams_first_, n, stream);
  const std::span<const int32_t> next = tokens.subspan(static_cast<size_t>(state_.position + 1), static_cast<size_t>(n));
  CudaOps::Ids caught_up{{next.begin(), next.end()}, DeviceArray<int32_t>({n}, stream), {}};
  caught_up.device.copy_from_host(caught_up.host.data());
  DeviceArray<float> logits = block_.forward(state_, h, caught_up);

  // Draft 1 from the last true slot; then chain on the block's own streams, and undo the chain:
  // the chained slots overwrite window rows that the next true slots read.
  DeviceArray<int32_t> drafts({k}, stream);
  DeviceArray<uint8_t> kept_window = state_.layer.window;
  const int64_t kept_position = state_.position;
  DeviceArray<float> last = rows_of(h, n - 1, 1, stream);
  check(argmax_rows(logits.data() + (n - 1) * vocab, 1, vocab, drafts.data(), stream), "MTP drafter (argmax)");
  for (int i = 1; i < k; ++i) {
    CudaOps::Ids previous{{}, DeviceArray<int32_t>({1}, stream), {}};  // chosen on the device: no host copy
    check(cudaMemcpyAsync(previous.device.data(), drafts.data() + (i - 1), sizeof(int32_t), cudaMemcpyDeviceToDevice,
                          stream),
          "MTP drafter (chain)");
    logits = block_.forward(state_, last, previous);
    check(argmax_rows(logits.data(), 1, vocab, drafts.data() + i, stream), "MTP drafter (argmax)");
  }
  state_.layer.window = std::move(kept_window);
  state_.position = kept_position;

  std::vector<int32_t> ids(static_cast<size_t>(k));
  drafts.copy_to_host(ids.data());
  check(cudaStreamSynchronize(stream), "MTP drafter (download drafts)");
  std::vector<engine::Draft> out;
  for (int32_t id : ids) out.push_back({id, {}});
  return out;
}

}  // namespace frank::cuda
