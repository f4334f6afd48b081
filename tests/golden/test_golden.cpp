// frank's CPU reference against transformers' DeepseekV4ForCausalLM on every golden fixture, fed
// in every way: all at once, prefill + one-token decode, and chunks that cut through windows.
//
// Tolerance: |frank - transformers| <= 1e-4 * max(1, |transformers|) per logit. Both sides compute
// in fp32 from the same fp32 weights; what differs is summation order (frank accumulates dot
// products in double, torch in blocked fp32) and transcendental functions' last bits. Through
// ~6 layers of mixing these stay near 1e-6 relative; 1e-4 leaves room for that and nothing else:
// a wrong mask, a missed bias or an off-by-one window moves logits by 1e-2 or more.
#include <gtest/gtest.h>

#include <cmath>
#include <fmt/format.h>

#include "fixture.h"
#include "frank/engine/run_modes.h"
#include "frank/model/loader.h"

namespace frank::test {
namespace {

constexpr double kRelTolerance = 1e-4;

struct Case {
  std::filesystem::path dir;
  std::string mode;  // a --mode string, or "fixture-chunks" for the chunk list transformers itself ran
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.dir.filename().string() << " " << c.mode; }

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& dir : fixture_dirs())
    for (const char* mode : {"full", "incremental", "chunked:1", "chunked:3", "chunked:5", "fixture-chunks"})
      cases.push_back({dir, mode});
  return cases;
}

class Golden : public ::testing::TestWithParam<Case> {};

TEST_P(Golden, LogitsMatchTransformers) {
  const Case& c = GetParam();
  const Fixture f = load_fixture(c.dir);
  ASSERT_TRUE(f.meta.at("indexer_ties").empty())
      << f.name() << ": the fixture has indexer ties at the k-th place; regenerate it with more index heads";
  auto loaded = model::load_model(c.dir);
  ASSERT_EQ(loaded.config.vocab_size, f.vocab);
  engine::Model model(std::move(loaded.config), std::move(loaded.weights));

  Tensor logits;
  if (c.mode == "fixture-chunks") {
    engine::CpuRunner runner(model);
    logits = fixture_chunk_logits(runner, f);
  } else {
    auto mode = engine::parse_feed_mode(c.mode);
    mode.prefill = f.meta.at("prefill").get<int64_t>();
    logits = engine::sequence_logits(model, f.ids, mode);
  }

  const LogitComparison r = compare_logits(f, logits, kRelTolerance);
  std::cout << fmt::format("[golden] {} mode {}: {} tokens, max |diff| {:.3g}, max scaled diff {:.3g}\n", f.name(),
                           c.mode, f.ids.size(), r.max_abs, r.max_rel);
  EXPECT_EQ(r.failures, 0) << f.name() << " mode " << c.mode << ": " << r.failures
                           << " logits out of tolerance; first at " << r.first_failure;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::ValuesIn(all_cases()), [](const auto& info) {
  std::string name = info.param.dir.filename().string() + "_" + info.param.mode;
  for (auto& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
});

// The fixture set itself: the golden tests above must not pass by finding nothing.
TEST(GoldenFixtures, AllPresent) {
  const auto dirs = fixture_dirs();
  EXPECT_GE(dirs.size(), 3u) << "expected the tiny-v4 fixtures under " << fixture_root();
}

}  // namespace
}  // namespace frank::test
