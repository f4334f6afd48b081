// Greedy speculative decoding on DeepSeek-V4.1 (CpuV41VerifyTarget: verify calls rolled back by
// v41_rewind) emits exactly the tokens of plain greedy decoding with V41Model, one token per call,
// whatever the drafter proposes, for k = 1..4 drafts per verify step, on every V4.1 fixture: 48
// generated tokens close many ratio-2 groups inside verify calls, wrap the window rings (8 and 16
// rows) several times and pass the Engram layers' look-back across rejected drafts.
#include <gtest/gtest.h>

#include <span>

#include "fixture.h"
#include "greedy_reference.h"
#include "scripted_drafter.h"
#include "frank/core/error.h"
#include "frank/engine/sampling.h"
#include "frank/engine/speculative.h"
#include "frank/engine/v41_model.h"
#include "frank/engine/v41_verify_target.h"
#include "frank/model/loader_v41.h"

namespace frank::engine {
namespace {

using test::ScriptedDrafter;

TEST(SpeculativeV41Golden, GreedyEqualsPlainGreedyForEveryDrafter) {
  const size_t prompt_length = 6, generated = 48;
  for (const auto& dir : test::fixture_dirs("dsv41")) {
    const auto f = test::load_fixture(dir);
    const V41Model model(model::load_v41_model(dir, dir / "reference.safetensors"));
    const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + prompt_length);

    const std::vector<int32_t> plain = test::plain_greedy(model, prompt, prompt_length + generated, f.vocab);

    for (int k = 1; k <= 4; ++k)
      for (const auto& [name, wrong] : test::scripted_drafters()) {
        ScriptedDrafter drafter(plain, static_cast<int>(f.vocab), wrong, /*host_streams=*/false);
        std::vector<int32_t> tokens = prompt;
        V41Session session = model.new_session();
        CpuV41VerifyTarget target(model, session);
        SpeculativeDecoder decoder(target, drafter, k, SamplingParams{});
        const Tensor prefill = target.forward(tokens, Model::Logits::Last, nullptr);
        decoder.start(std::span<const float>(prefill.row(0), static_cast<size_t>(f.vocab)), Tensor(), 0);
        while (tokens.size() < plain.size()) decoder.step(tokens, decoder.draft_tokens());
        tokens.resize(plain.size());
        ASSERT_EQ(tokens, plain) << f.name() << ": k = " << k << ", drafter " << name;
        const auto& st = decoder.stats();
        if (std::string(name) == "wrong") {
          EXPECT_EQ(st.accepted, 0);
        }
        if (std::string(name) == "right") {
          EXPECT_EQ(st.accepted, st.drafted);
        }
        if (std::string(name) == "mixed") {
          EXPECT_TRUE(st.accepted > 0 && st.accepted < st.drafted);
        }
        EXPECT_EQ(st.emitted, st.verify_steps + st.accepted);
      }
  }
}

// A request that ends at an emitted token before the last of a step keeps the session there: the
// rewound session equals a fresh one fed the same tokens (the next token's logits, bit for bit).
TEST(SpeculativeV41Golden, EndingInsideAStepRewindsToTheLastUsedToken) {
  const auto dir = test::fixture_dirs("dsv41").front();
  const auto f = test::load_fixture(dir);
  const V41Model model(model::load_v41_model(dir, dir / "reference.safetensors"));
  const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + 11);  // odd: a ratio-2 group is open
  const std::vector<int32_t> plain = test::plain_greedy(model, prompt, prompt.size() + 6, f.vocab);
  ScriptedDrafter drafter(plain, static_cast<int>(f.vocab), [](size_t) { return false; }, /*host_streams=*/false);
  std::vector<int32_t> tokens = prompt;
  V41Session session = model.new_session();
  CpuV41VerifyTarget target(model, session);
  SpeculativeDecoder decoder(target, drafter, 4, SamplingParams{});
  const Tensor prefill = target.forward(tokens, Model::Logits::Last, nullptr);
  decoder.start(std::span<const float>(prefill.row(0), static_cast<size_t>(f.vocab)), Tensor(), 0);
  ASSERT_EQ(decoder.step(tokens, 4).size(), 5u);
  test::expect_rewinds_match_fresh(model, session, decoder, tokens, prompt.size(), f.vocab);
}

// What the V4.1 target cannot do says so: it gives no streams, and takes no verify call longer
// than the window (its rewind could not undo it).
TEST(SpeculativeV41, TargetRefusesStreamsAndOverlongCalls) {
  const V41Model model(model::load_v41_model(test::fixture_dirs("dsv41").front(),
                                             test::fixture_dirs("dsv41").front() / "reference.safetensors"));
  V41Session session = model.new_session();
  CpuV41VerifyTarget target(model, session);
  const std::vector<int32_t> ids(static_cast<size_t>(target.max_verify_tokens()) + 1, 3);
  Tensor streams;
  EXPECT_THROW(target.forward(std::span(ids).first(2), Model::Logits::Last, &streams), Error);
  EXPECT_THROW(target.verify(std::span(ids).first(2), &streams), Error);
  EXPECT_THROW(target.verify(ids, nullptr), Error);
  EXPECT_EQ(session.position, 0);
  EXPECT_EQ(target.verify(std::span(ids).first(2), nullptr).rows(), 2);
}

}  // namespace
}  // namespace frank::engine
