// Greedy speculative decoding on the DSpark fixture with V4.1's own drafter (DSparkDrafter over
// CpuV41VerifyTarget) emits exactly plain greedy decoding's tokens for k = 1..4, and at every step
// the drafter proposes what a fresh drafter proposes from the target features of exactly the kept
// tokens (so no rejected position's context row survives in its rings, and a rewind after the
// step takes its rows back too).
#include <gtest/gtest.h>

#include <span>

#include "dspark_fixture.h"
#include "greedy_reference.h"
#include "frank/engine/dspark_drafter.h"
#include "frank/engine/sampling.h"
#include "frank/engine/speculative.h"
#include "frank/engine/v41_model.h"
#include "frank/engine/v41_verify_target.h"

namespace frank::engine {
namespace {

// The drafts of a fresh drafter whose context holds the one-shot features of tokens[0 .. n-2].
std::vector<int32_t> fresh_drafts(const V41Model& model, std::span<const int32_t> tokens, int k) {
  V41Session session = model.new_session();
  Tensor features;
  model.forward(session, tokens.first(tokens.size() - 1), Model::Logits::Last, &features);
  const DSpark dspark(model);
  DSparkState state = dspark.new_state();
  dspark.observe(state, features);
  const auto d = dspark.draft(state, tokens.back());
  return std::vector<int32_t>(d.tokens.begin(), d.tokens.begin() + k);
}

// DSparkDrafter, checked against fresh_drafts at every proposal.
class CheckedDrafter : public Drafter {
 public:
  CheckedDrafter(const V41Model& model, const CpuV41VerifyTarget& target) : model_(model), inner_(model, target) {}
  bool reads_host_streams() const override { return false; }
  void observe(const Tensor& s, int64_t first, int64_t rows) override { inner_.observe(s, first, rows); }
  void rewind_to(int64_t position) override { inner_.rewind_to(position); }
  std::vector<Draft> propose(std::span<const int32_t> tokens, int k) override {
    auto drafts = inner_.propose(tokens, k);
    std::vector<int32_t> got;
    for (const auto& d : drafts) got.push_back(d.token);
    EXPECT_EQ(got, fresh_drafts(model_, tokens, k)) << "at position " << tokens.size() - 1;
    ++proposals;
    return drafts;
  }
  int proposals = 0;

 private:
  const V41Model& model_;
  DSparkDrafter inner_;
};

TEST(DSparkSpeculative, GreedyEqualsPlainGreedy) {
  const auto g = test::dspark_golden();
  const auto ids = g.at("ids").get<std::vector<int32_t>>();
  const int64_t vocab = g.at("vocab_size").get<int64_t>();
  const V41Model model(test::load_dspark_fixture_model());
  const size_t prompt_length = 6, generated = 40;
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + prompt_length);

  const std::vector<int32_t> plain = test::plain_greedy(model, prompt, prompt_length + generated, vocab);

  for (int k = 1; k <= 4; ++k) {
    std::vector<int32_t> tokens = prompt;
    V41Session session = model.new_session();
    CpuV41VerifyTarget target(model, session, /*with_features=*/true);
    CheckedDrafter drafter(model, target);
    SpeculativeDecoder decoder(target, drafter, k, SamplingParams{});
    const Tensor prefill = target.forward(tokens, Model::Logits::Last, nullptr);
    decoder.start(std::span<const float>(prefill.row(0), static_cast<size_t>(vocab)), Tensor(), 0);
    while (tokens.size() < plain.size()) decoder.step(tokens, decoder.draft_tokens());
    const std::vector<int32_t> emitted = tokens;
    tokens.resize(plain.size());
    ASSERT_EQ(tokens, plain) << "k = " << k;
    // A request that ends inside the last step: target and drafter go back to its first token, and
    // the drafter proposes from there what a fresh one does.
    decoder.rewind_last_step(1);
    const size_t kept = static_cast<size_t>(session.position);
    if (emitted.size() > kept) drafter.propose(std::span(emitted).first(kept + 1), k);
    const auto& st = decoder.stats();
    std::cout << "[dspark-spec] k = " << k << ": " << st.verify_steps << " steps, " << st.accepted << " of "
              << st.drafted << " drafts accepted\n";
    EXPECT_GE(drafter.proposals, st.verify_steps);
  }
}

}  // namespace
}  // namespace frank::engine
