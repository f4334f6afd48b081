#pragma once
// What the speculative-decoding tests compare against, for either model family (engine::Model and
// engine::V41Model take the same new_session / forward calls; plain_greedy also takes
// cuda::CudaV41Model): plain greedy decoding one token per call, and a session continuing exactly
// like a fresh one fed the same tokens.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "frank/core/tensor.h"
#include "frank/engine/model.h"
#include "frank/engine/sampling.h"
#include "frank/engine/speculative.h"

namespace frank::test {

// `prompt` continued by greedy decoding to `length` tokens: one forward call for the prompt, then one
// per token.
template <class M>
std::vector<int32_t> plain_greedy(M& model, const std::vector<int32_t>& prompt, size_t length, int64_t vocab) {
  std::vector<int32_t> plain = prompt;
  auto session = model.new_session();
  Tensor logits = model.forward(session, plain, engine::Model::Logits::Last);
  while (plain.size() < length) {
    plain.push_back(engine::argmax(std::span<const float>(logits.row(0), static_cast<size_t>(vocab))));
    logits = model.forward(session, std::span<const int32_t>(&plain.back(), 1), engine::Model::Logits::Last);
  }
  return plain;
}

// After `decoder`'s last step emitted 5 tokens onto `tokens` (the first `prompt_size` the prompt):
// each rewind_last_step(keep), keep = 5 .. 1 (a request's end only ever moves earlier), leaves
// `session` at the prompt plus `keep` tokens, and one more token's logits equal, bit for bit, those
// of a fresh session fed the same tokens.
template <class M, class S>
void expect_rewinds_match_fresh(const M& model, const S& session, engine::SpeculativeDecoder& decoder,
                                const std::vector<int32_t>& tokens, size_t prompt_size, int64_t vocab) {
  const int32_t probe = 7;
  for (int keep = 5; keep >= 1; --keep) {
    decoder.rewind_last_step(keep);
    ASSERT_EQ(session.position, static_cast<int64_t>(prompt_size) + keep);
    S kept = session;
    const Tensor got = model.forward(kept, std::span<const int32_t>(&probe, 1));
    std::vector<int32_t> fed(tokens.begin(), tokens.begin() + static_cast<int64_t>(prompt_size) + keep);
    fed.push_back(probe);
    S fresh = model.new_session();
    const Tensor want = model.forward(fresh, fed, engine::Model::Logits::Last);
    for (int64_t v = 0; v < vocab; ++v) ASSERT_EQ(got.row(0)[v], want.row(0)[v]) << "kept " << keep;
  }
}

}  // namespace frank::test
