#include "frank/engine/speculative.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "frank/core/error.h"

namespace frank::engine {
namespace {

double q_of(const Draft& d) { return d.q.empty() ? 1.0 : d.q[static_cast<size_t>(d.token)]; }

// max(0, p - q), renormalised. Empty when p is covered by q (then p == q and nothing was rejected
// with positive probability: the caller never asks).
std::vector<double> residual(const std::vector<double>& p, const Draft& d) {
  std::vector<double> r(p.size());
  double sum = 0.0;
  for (size_t v = 0; v < p.size(); ++v) {
    const double q = d.q.empty() ? (static_cast<int32_t>(v) == d.token ? 1.0 : 0.0) : d.q[v];
    sum += r[v] = std::max(0.0, p[v] - q);
  }
  if (sum <= 0.0) throw Error("speculative decoding: a rejected draft left no residual probability");
  for (double& x : r) x /= sum;
  return r;
}

}  // namespace

int32_t draw_token(const std::vector<double>& p, std::mt19937_64& rng) {
  double total = 0.0;
  for (double x : p) total += x;
  const double u = std::uniform_real_distribution<double>(0.0, total)(rng);
  double acc = 0.0;
  int32_t last = 0;
  for (size_t v = 0; v < p.size(); ++v) {
    if (p[v] <= 0.0) continue;
    acc += p[v];
    last = static_cast<int32_t>(v);
    if (u < acc) return last;
  }
  return last;  // u landed on the rounding gap at the top
}

Acceptance accept_drafts(const std::vector<std::vector<double>>& target, const std::vector<Draft>& drafts,
                         std::mt19937_64& rng) {
  if (target.size() != drafts.size() + 1) throw Error("accept_drafts: one target distribution per draft, plus one");
  for (size_t i = 0; i < drafts.size(); ++i) {
    const double p = target[i][static_cast<size_t>(drafts[i].token)], q = q_of(drafts[i]);
    // Accept with probability min(1, p/q); p >= q accepts without drawing (greedy stays exact
    // and consumes no random numbers).
    const bool accepted = p >= q || (p > 0.0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p / q);
    if (!accepted) return {static_cast<int>(i), residual(target[i], drafts[i])};
  }
  return {static_cast<int>(drafts.size()), target.back()};
}

SpeculativeDecoder::SpeculativeDecoder(VerifyTarget& target, Drafter& drafter, int draft_tokens,
                                       const SamplingParams& sampling, DraftLengthChooser* chooser)
    : target_(target),
      drafter_(drafter),
      chooser_(chooser),
      k_(chooser ? chooser->max_draft_tokens() : draft_tokens),
      sampling_(sampling),
      rng_(sampling.seed) {
  if (k_ < 0 || k_ + 1 > target.max_verify_tokens())
    throw Error(fmt::format("draft tokens must be in 0..{} here, got {}", target.max_verify_tokens() - 1, k_));
  stats_.accepted_at.assign(static_cast<size_t>(k_), 0);
}

void SpeculativeDecoder::start(std::span<const float> logits, const Tensor& streams, int64_t first) {
  pending_ = sampling_distribution(logits, sampling_);
  pending_logits_.assign(logits.begin(), logits.end());
  drafter_.observe(streams, first, target_.position() - first);
}

std::vector<EmittedToken> SpeculativeDecoder::step(std::vector<int32_t>& tokens, int max_drafts) {
  if (pending_.empty()) throw Error("speculative decoding: step() before start()");
  const auto started = std::chrono::steady_clock::now();
  const int32_t next = draw_token(pending_, rng_);
  tokens.push_back(next);
  const int k = std::max(0, std::min(chooser_ ? chooser_->next() : k_, max_drafts));
  std::vector<Draft> drafts = k > 0 ? drafter_.propose(tokens, k) : std::vector<Draft>{};
  if (static_cast<int>(drafts.size()) > k) drafts.resize(static_cast<size_t>(k));

  std::vector<int32_t> fed{next};
  for (const Draft& d : drafts) fed.push_back(d.token);
  last_step_start_ = target_.position();
  Tensor streams;
  const bool host_streams = drafter_.reads_host_streams();
  const Tensor logits = target_.verify(fed, host_streams ? &streams : nullptr);
  std::vector<std::vector<double>> target;
  for (int64_t r = 0; r < logits.rows(); ++r)
    target.push_back(
        sampling_distribution(std::span<const float>(logits.row(r), static_cast<size_t>(logits.cols())), sampling_));

  Acceptance a = accept_drafts(target, drafts, rng_);
  if (a.accepted < static_cast<int>(drafts.size())) target_.rewind(1 + a.accepted);
  last_step_kept_ = 1 + a.accepted;
  std::vector<EmittedToken> emitted{{next, std::move(pending_logits_)}};
  for (int i = 0; i < a.accepted; ++i) {
    tokens.push_back(drafts[static_cast<size_t>(i)].token);
    emitted.push_back({drafts[static_cast<size_t>(i)].token,
                       std::vector<float>(logits.row(i), logits.row(i) + logits.cols())});
  }
  pending_ = std::move(a.next);
  pending_logits_.assign(logits.row(a.accepted), logits.row(a.accepted) + logits.cols());
  if (host_streams) {
    streams.shape[0] = 1 + a.accepted;  // the kept positions' rows come first
    streams.data.resize(static_cast<size_t>(streams.shape[0] * streams.shape[1]));
  }
  drafter_.observe(streams, last_step_start_, 1 + a.accepted);

  if (chooser_)
    chooser_->observe(static_cast<int>(drafts.size()), a.accepted,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  ++stats_.verify_steps;
  stats_.drafted += static_cast<int64_t>(drafts.size());
  stats_.accepted += a.accepted;
  for (int i = 0; i < a.accepted; ++i) ++stats_.accepted_at[static_cast<size_t>(i)];
  stats_.emitted += 1 + a.accepted;
  return emitted;
}

void SpeculativeDecoder::rewind_last_step(int keep) {
  if (keep < 1 || keep > last_step_kept_ || target_.position() != last_step_start_ + last_step_kept_)
    throw Error(fmt::format("speculative decoding: cannot keep {} tokens of the last step", keep));
  if (keep < last_step_kept_) {
    target_.rewind(keep);
    drafter_.rewind_to(last_step_start_ + keep);
  }
  last_step_kept_ = keep;
}

}  // namespace frank::engine
