#pragma once
// Speculative decoding: a drafter proposes the next k tokens, the model checks them in one verify
// step (a forward call of k+1 tokens), and the longest acceptable prefix is kept; the session is
// rewound past the rest (VerifyTarget::rewind: nothing accepted is recomputed). The target is the
// model on any backend (verify_target.h); the acceptance rule below is the same for all.
//
// Acceptance is the rejection rule of Leviathan et al. (2023) and Chen et al. (2023): draft d_i,
// proposed with probability q_i(d_i), is accepted with probability min(1, p_i(d_i) / q_i(d_i)),
// where p_i is the model's sampling distribution there (sampling_distribution: temperature and
// top-p); at the first rejection the token is drawn from the residual max(0, p_i - q_i),
// renormalised. Every emitted token then has exactly the distribution plain sampling would give
// it. Greedy decoding is the case where p is one-hot at the argmax: a draft is kept iff it is the
// argmax, so the tokens are exactly those of plain greedy decoding. A deterministic drafter (q
// one-hot at its proposal) is allowed with any target distribution.
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/draft_length.h"
#include "frank/engine/model.h"
#include "frank/engine/verify_target.h"
#include "frank/engine/sampling.h"

namespace frank::engine {

struct Draft {
  int32_t token = 0;
  std::vector<double> q;  // the drafter's distribution it was drawn from; empty: one-hot at `token`
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Whether observe() needs the streams on the host. A drafter on the GPU reads them where its
  // target left them (cuda::CudaMtpDrafter), so they are not downloaded.
  virtual bool reads_host_streams() const { return true; }
  // The main model's residual streams (before its hyper-head) of the positions first .. first +
  // rows - 1, as the session keeps them: after the prefill and after each verify step's accepted
  // tokens. `streams` holds them [rows, hc_mult * hidden] when reads_host_streams(), else is empty.
  virtual void observe(const Tensor& streams, int64_t first, int64_t rows) {
    (void)streams;
    (void)first;
    (void)rows;
  }
  // Up to k proposals for the tokens after `tokens` (the whole sequence so far, including the
  // token the verify step feeds first).
  virtual std::vector<Draft> propose(std::span<const int32_t> tokens, int k) = 0;
  // The target's session was taken back to `position` tokens, fewer than the drafter last observed
  // (SpeculativeDecoder::rewind_last_step): state kept per position past it must go too.
  virtual void rewind_to(int64_t position) { (void)position; }
};

// Speculative decoding on one session (engine::BackendSession::speculation): the main model over it
// as the verify target, and the model's MTP block drafting on the same device. The drafter comes
// after the target, so it is destroyed first (a GPU drafter reads the target's device streams).
struct Speculation {
  std::unique_ptr<VerifyTarget> target;
  std::unique_ptr<Drafter> drafter;
};

// The acceptance rule on one verify step: `target[i]` is the model's distribution for draft i
// (i < drafts.size()), and target[drafts.size()] the one after the last draft. Returns how many
// drafts are accepted and the distribution of the token after them: the residual at the first
// rejection, else the last target.
struct Acceptance {
  int accepted = 0;
  std::vector<double> next;
};
Acceptance accept_drafts(const std::vector<std::vector<double>>& target, const std::vector<Draft>& drafts,
                         std::mt19937_64& rng);

// Draws from a distribution (weights summing to about 1).
int32_t draw_token(const std::vector<double>& p, std::mt19937_64& rng);

struct SpeculativeStats {
  int64_t verify_steps = 0, drafted = 0, accepted = 0, emitted = 0;
  std::vector<int64_t> accepted_at;  // [i]: steps whose draft i was accepted
};

// A token a verify step emits, with the raw logits of the position it was chosen at (for
// log-probabilities: the model's, whatever the acceptance rule drew it from).
struct EmittedToken {
  int32_t id = 0;
  std::vector<float> logits;
};

class SpeculativeDecoder {
 public:
  // `chooser`, when given (--draft-tokens auto), picks each step's draft count from measured costs
  // and is told how each step went; draft_tokens is then ignored (the chooser's maximum applies).
  // Throws frank::Error when k + 1 tokens do not fit one verify call of the target.
  SpeculativeDecoder(VerifyTarget& target, Drafter& drafter, int draft_tokens, const SamplingParams& sampling,
                     DraftLengthChooser* chooser = nullptr);

  // After a prefill into the target's session: `logits` are the logits of its last position, `streams` the
  // prefill's residual streams of positions first .. (for the drafter; empty when the drafter does
  // not read host streams).
  void start(std::span<const float> logits, const Tensor& streams, int64_t first);
  // One verify step: draws the next token, asks the drafter for up to min(k, max_drafts) more (k:
  // fixed, or the chooser's pick),
  // feeds them all in one forward call, keeps the accepted prefix (rewinding the rest) and appends
  // the emitted tokens (1..k+1) to `tokens`, which the target's session has then consumed.
  std::vector<EmittedToken> step(std::vector<int32_t>& tokens, int max_drafts);
  int draft_tokens() const { return k_; }
  const SpeculativeStats& stats() const { return stats_; }
  // After a step whose emitted tokens were not all used (the request ended at one of them): takes
  // the target's session to where only the first `keep` (>= 1) emitted tokens of that step were fed.
  void rewind_last_step(int keep);

 private:
  VerifyTarget& target_;
  Drafter& drafter_;
  DraftLengthChooser* chooser_;
  int k_;
  SamplingParams sampling_;
  std::mt19937_64 rng_;
  std::vector<double> pending_;        // the distribution of the next token
  std::vector<float> pending_logits_;  // the model's logits there
  int64_t last_step_start_ = 0, last_step_kept_ = 0;  // the last step's first position and kept tokens
  SpeculativeStats stats_;
};

}  // namespace frank::engine
