#include "frank/engine/run_modes.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "frank/core/error.h"

namespace frank::engine {

FeedMode parse_feed_mode(const std::string& text) {
  FeedMode mode;
  if (text == "full") return mode;
  if (text == "incremental") {
    mode.kind = FeedMode::Kind::Incremental;
    return mode;
  }
  const std::string prefix = "chunked:";
  if (text.starts_with(prefix)) {
    const char* first = text.data() + prefix.size();
    const char* last = text.data() + text.size();
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(first, last, n);
    if (ec == std::errc() && ptr == last && first != last && n > 0) {
      mode.kind = FeedMode::Kind::Chunked;
      mode.chunk = n;
      return mode;
    }
  }
  throw Error(fmt::format("unknown mode '{}': expected full, incremental or chunked:N with N > 0", text));
}

Tensor sequence_logits(const Model& model, std::span<const int32_t> ids, const FeedMode& mode) {
  CpuRunner runner(model);
  return sequence_logits(runner, model.config().vocab_size, ids, mode);
}

Tensor sequence_logits(SessionRunner& fresh, int64_t vocab, std::span<const int32_t> ids, const FeedMode& mode) {
  const int64_t n = static_cast<int64_t>(ids.size());
  Tensor logits({n, vocab});
  auto feed = [&](int64_t begin, int64_t count) {
    if (count <= 0) return;
    const Tensor part = fresh.forward(ids.subspan(begin, count), Model::Logits::All);
    std::copy(part.data.begin(), part.data.end(), logits.row(begin));
  };
  switch (mode.kind) {
    case FeedMode::Kind::Full:
      feed(0, n);
      break;
    case FeedMode::Kind::Incremental: {
      const int64_t prefill = mode.prefill < 0 ? n / 2 : std::min(mode.prefill, n);
      feed(0, prefill);
      for (int64_t t = prefill; t < n; ++t) feed(t, 1);
      break;
    }
    case FeedMode::Kind::Chunked:
      for (int64_t t = 0; t < n; t += mode.chunk) feed(t, std::min(mode.chunk, n - t));
      break;
  }
  return logits;
}

}  // namespace frank::engine
