// Greedy speculative decoding emits exactly the tokens of plain greedy decoding, whatever the
// drafter proposes, for k = 1..4 drafts per verify step, on every golden fixture: 48 generated
// tokens cross CSA (4) and HCA (16) window closes and wrap the 8-row window ring many times.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <span>

#include "fixture.h"
#include "greedy_reference.h"
#include "scripted_drafter.h"
#include "frank/core/error.h"
#include "frank/engine/model.h"
#include "frank/engine/mtp_drafter.h"
#include "frank/engine/sampling.h"
#include "frank/engine/speculative.h"
#include "frank/model/loader.h"

namespace frank::engine {
namespace {

using test::ScriptedDrafter;

TEST(SpeculativeGolden, GreedyEqualsPlainGreedyForEveryDrafter) {
  const size_t prompt_length = 6, generated = 48;
  for (const auto& dir : test::fixture_dirs()) {
    const auto f = test::load_fixture(dir);
    auto loaded = model::load_model(dir);
    const Model model(std::move(loaded.config), std::move(loaded.weights));
    const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + prompt_length);

    // Plain greedy decoding, one token per forward call.
    std::vector<int32_t> plain = prompt;
    Session s = model.new_session();
    Tensor logits = model.forward(s, plain);
    while (plain.size() < prompt_length + generated) {
      const int32_t next = argmax(std::span<const float>(logits.row(logits.rows() - 1), static_cast<size_t>(f.vocab)));
      plain.push_back(next);
      logits = model.forward(s, std::span<const int32_t>(&next, 1));
    }

    for (int k = 1; k <= 4; ++k)
      for (const auto& [name, wrong] : test::scripted_drafters()) {
        ScriptedDrafter drafter(plain, static_cast<int>(f.vocab), wrong);
        std::vector<int32_t> tokens = prompt;
        Session session = model.new_session();
        CpuVerifyTarget target(model, session);
        SpeculativeDecoder decoder(target, drafter, k, SamplingParams{});
        Tensor streams;
        const Tensor prefill = model.forward(session, tokens, Model::Logits::Last, &streams);
        decoder.start(std::span<const float>(prefill.row(0), static_cast<size_t>(f.vocab)), streams, 0);
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
        EXPECT_EQ(st.emitted, st.verify_steps + st.accepted);
      }
  }
}

// A request that ends at an emitted token before the last of a step keeps the session there: the
// rewound session continues exactly as a fresh one fed the same tokens.
TEST(SpeculativeGolden, EndingInsideAStepRewindsToTheLastUsedToken) {
  const auto dir = test::fixture_dirs().front();
  const auto f = test::load_fixture(dir);
  auto loaded = model::load_model(dir);
  const Model model(std::move(loaded.config), std::move(loaded.weights));
  const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + 10);
  // Plain greedy continuation, so that a drafter proposing it gets all 4 drafts accepted.
  const std::vector<int32_t> plain = test::plain_greedy(model, prompt, prompt.size() + 6, f.vocab);
  ScriptedDrafter drafter(plain, static_cast<int>(f.vocab), [](size_t) { return false; });
  std::vector<int32_t> tokens = prompt;
  Session session = model.new_session();
  CpuVerifyTarget target(model, session);
  SpeculativeDecoder decoder(target, drafter, 4, SamplingParams{});
  Tensor streams;
  const Tensor prefill = model.forward(session, tokens, Model::Logits::Last, &streams);
  decoder.start(std::span<const float>(prefill.row(0), static_cast<size_t>(f.vocab)), streams, 0);
  const auto emitted = decoder.step(tokens, 4);
  ASSERT_EQ(emitted.size(), 5u);
  test::expect_rewinds_match_fresh(model, session, decoder, tokens, prompt.size(), f.vocab);
  EXPECT_THROW(decoder.rewind_last_step(0), Error);
  EXPECT_THROW(decoder.rewind_last_step(2), Error);  // the step was already rewound to 1
}

// The same with the model's own MTP block drafting (the fixture with an MTP block), k = 1..4.
TEST(SpeculativeGolden, MtpDraftedGreedyEqualsPlainGreedy) {
  auto loaded = model::load_model(std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv4-mtp" / "tiny-v4-mtp");
  const Model model(std::move(loaded.config), std::move(loaded.weights));
  const auto meta = nlohmann::json::parse(
      std::ifstream(std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv4-mtp" / "tiny-v4-mtp" / "golden.json"));
  const auto ids = meta.at("ids").get<std::vector<int32_t>>();
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 10);
  const size_t total = prompt.size() + 40;

  const std::vector<int32_t> plain = test::plain_greedy(model, prompt, total, model.config().vocab_size);
  for (int k = 1; k <= 4; ++k) {
    MtpDrafter drafter(model);
    std::vector<int32_t> tokens = prompt;
    Session session = model.new_session();
    CpuVerifyTarget target(model, session);
    SpeculativeDecoder decoder(target, drafter, k, SamplingParams{});
    Tensor streams;
    const Tensor prefill = model.forward(session, tokens, Model::Logits::Last, &streams);
    decoder.start(std::span<const float>(prefill.row(0), static_cast<size_t>(prefill.cols())), streams, 0);
    while (tokens.size() < total) decoder.step(tokens, decoder.draft_tokens());
    tokens.resize(total);
    ASSERT_EQ(tokens, plain) << "k = " << k;
    const auto& st = decoder.stats();
    std::cout << fmt::format("[mtp drafts] k = {}: {} verify steps, {} of {} drafts accepted\n", k, st.verify_steps,
                             st.accepted, st.drafted);
    EXPECT_EQ(st.drafted, st.verify_steps * k);
  }
}

}  // namespace
}  // namespace frank::engine
