// The `frank` binary on DeepSeek-V4.1 checkpoints (the tests/fixtures/dsv41 directories): `logits`
// and `generate` pick the V4.1 CPU reference from config.json, and what V4.1 cannot do yet ends in
// a clear error. Tolerance as in test_golden_v41.cpp: 1e-4 * max(1, |logit|).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "fixture.h"
#include "run_frank.h"

namespace frank::test {
namespace {

using ::testing::HasSubstr;

// The fixtures ship the Engram hash data in reference.safetensors.
std::string v41_model_args(const Fixture& f) {
  return fmt::format("--model {} --engram-data {}", f.dir.string(), (f.dir / "reference.safetensors").string());
}

TEST(CliV41, LogitsMatchTransformers) {
  for (const char* name : {"tiny-v41", "tiny-v41-native"}) {
    SCOPED_TRACE(name);
    const Fixture f = load_fixture(fixture_root("dsv41") / name);
    TempDir tmp;
    const auto out = tmp / "logits.f32";
    const auto r = run_frank(fmt::format("logits {} --ids {} --mode chunked:4 --out {}", v41_model_args(f),
                                         join_ids(f.ids, f.ids.size()), out.string()));
    ASSERT_EQ(r.exit_code, 0) << r.output();
    EXPECT_EQ(r.last_line(), fmt::format("shape {} {}", f.ids.size(), f.vocab));
    const std::vector<float> got = read_logits_file(f, out);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_LE(std::abs(got[i] - f.logits[i]), 1e-4 * std::max(1.0f, std::abs(f.logits[i])))
          << "position " << i / f.vocab << ", vocab " << i % f.vocab;
  }
}

TEST(CliV41, GreedyGenerateStartsWithTransformersArgmax) {
  const Fixture f = load_fixture(fixture_root("dsv41") / "tiny-v41");
  for (size_t prompt : {size_t{1}, size_t{20}, size_t{33}}) {
    const auto r = run_frank(fmt::format("generate {} --ids {} --max-tokens 4 --ignore-eos", v41_model_args(f),
                                         join_ids(f.ids, prompt)));
    ASSERT_EQ(r.exit_code, 0) << r.output();
    const float* row = f.logits.data() + (prompt - 1) * f.vocab;
    const auto best = std::max_element(row, row + f.vocab) - row;
    const std::string line = r.last_line();
    EXPECT_THAT(line, ::testing::StartsWith(std::to_string(best) + ",")) << "prompt of " << prompt;
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 3) << line;
  }
}

TEST(CliV41, WhatV41CannotDoGivesClearErrors) {
  const Fixture f = load_fixture(fixture_root("dsv41") / "tiny-v41");
  const auto no_hash_data = run_frank(fmt::format("generate --model {} --max-tokens 2", f.dir.string()));
  EXPECT_EQ(no_hash_data.exit_code, 1);
  EXPECT_THAT(no_hash_data.err, HasSubstr("--engram-data"));
  // --backend cuda runs V4.1 on a GPU build (frank_cuda_tests); these need more than a backend.
  struct Refused {
    const char* command;
    const char* options;
    const char* error;
  };
  const Refused refused[] = {
      {"generate", "--mhc-overlap true", "--mhc-overlap: needs --backend cuda"},
      {"generate", "--kv-dtype fp8", "--kv-dtype fp8"},
      {"generate", "--gpu-memory-budget 1", "cannot be split between GPU and CPU yet"},
      {"generate", "--draft-tokens 2", "has no DSpark drafter"},
      {"logits", "--ids 3,31 --out /dev/null", "outside the vocabulary"},
  };
  for (const Refused& r : refused) {
    const auto run = run_frank(fmt::format("{} {} {}", r.command, v41_model_args(f), r.options));
    EXPECT_EQ(run.exit_code, 1) << r.options;
    EXPECT_THAT(run.err, HasSubstr(r.error)) << r.options;
  }
}

// V4.1's own drafter (DSpark) behind --draft-tokens: greedy speculative decoding emits exactly the
// tokens of plain greedy decoding (the rule of engine/speculative.h; the drafter is checked against
// its fixture in test_dspark_golden.cpp). 40 tokens cross the fixture's ratio-2 group closes and
// window wraps many times.
TEST(CliV41, DraftTokensGiveTheSameGreedyTokens) {
  const auto dspark = fixture_root("dsv41").parent_path() / "dsv41-dspark" / "tiny-v41-dspark";
  const auto engram = fixture_root("dsv41") / "tiny-v41-native" / "reference.safetensors";
  const std::string base = fmt::format("generate --model {} --engram-data {} --ids 5,17,3,9 --max-tokens 40 --ignore-eos",
                                       dspark.string(), engram.string());
  const auto plain = run_frank(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.output();
  for (const char* k : {"1", "2", "4", "auto"}) {
    const auto drafted = run_frank(base + fmt::format(" --draft-tokens {}", k));
    ASSERT_EQ(drafted.exit_code, 0) << drafted.output();
    EXPECT_EQ(drafted.last_line(), plain.last_line()) << "k = " << k;
    EXPECT_THAT(drafted.err, HasSubstr("verify steps"));
  }
  // Sampling with drafts runs too (its distribution is the acceptance rule's, test_speculative_acceptance.cpp),
  // and is reproducible from its seed.
  const std::string sampled = base + " --draft-tokens 3 --temperature 0.8 --seed 7";
  const auto first = run_frank(sampled);
  ASSERT_EQ(first.exit_code, 0) << first.output();
  EXPECT_EQ(first.last_line(), run_frank(sampled).last_line());
}

}  // namespace
}  // namespace frank::test
