// Greedy speculative decoding emits exactly the tokens of plain greedy decoding, whatever the
// drafter proposes, for k = 1..4 drafts per verify step, on every golden fixture: 48 generated
// tokens cross CSA (4) and HCA (16) window closes and wrap the 8-row window ring many times.
#include <gtest/gtest.h>

#include <span>

#include "fixture.h"
#include "frank/engine/model.h"
#include "frank/engine/sampling.h"
#include "frank/engine/speculative.h"
#include "frank/model/loader.h"

namespace frank::engine {
namespace {

// Proposes the reference continuation, wrong where `wrong(position)` says so.
class ScriptedDrafter : public Drafter {
 public:
  ScriptedDrafter(std::vector<int32_t> reference, int vocab, std::function<bool(size_t)> wrong)
      : reference_(std::move(reference)), vocab_(vocab), wrong_(std::move(wrong)) {}
  std::vector<Draft> propose(std::span<const int32_t> tokens, int k) override {
    std::vector<Draft> out;
    for (size_t at = tokens.size(); at < tokens.size() + static_cast<size_t>(k) && at < reference_.size(); ++at)
      out.push_back({wrong_(at) ? (reference_[at] + 1) % vocab_ : reference_[at], {}});
    return out;
  }

 private:
  std::vector<int32_t> reference_;
  int vocab_;
  std::function<bool(size_t)> wrong_;
};

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

    const std::vector<std::pair<const char*, std::function<bool(size_t)>>> drafters = {
        {"right", [](size_t) { return false; }},
        {"wrong", [](size_t) { return true; }},
        {"mixed", [](size_t at) { return at % 3 == 0 || at % 7 == 0; }},
    };
    for (int k = 1; k <= 4; ++k)
      for (const auto& [name, wrong] : drafters) {
        ScriptedDrafter drafter(plain, static_cast<int>(f.vocab), wrong);
        SpeculativeDecoder decoder(model, drafter, k, SamplingParams{});
        std::vector<int32_t> tokens = prompt;
        Session session = model.new_session();
        const Tensor prefill = model.forward(session, tokens, Model::Logits::Last);
        decoder.start(std::span<const float>(prefill.row(0), static_cast<size_t>(f.vocab)));
        while (tokens.size() < plain.size()) decoder.step(session, tokens);
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

}  // namespace
}  // namespace frank::engine
