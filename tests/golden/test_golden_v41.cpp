// frank's DeepSeek-V4.1 CPU reference against transformers' DeepseekV41ForCausalLM (the dfcfb77
// source on transformers 5.24.0, tools/reference/make_dsv41_fixtures.py) on every V4.1 fixture, fed
// all at once, as prefill + one-token decode, in chunks of 1, 2, 3 and 5, and in the chunks
// transformers itself ran. Every mode is compared with transformers' one-shot logits.
//
// Tolerance: |frank - transformers| <= 1e-4 * max(1, |logit|) per logit, as for V4: both sides
// compute in fp32 from the same fp32 weights and differ in summation order and transcendental
// last bits (~1e-6 relative through the layers). The FP8/FP4 rounding transformers bakes in is
// reproduced bit for bit, so it adds nothing unless an input lands within an ulp of a rounding
// boundary (the fixtures were made so that transformers' own call shapes do not flip one, README
// surprise 3); a wrong mask, selection, source or rounding moves logits by 1e-2 or more.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fixture.h"
#include "frank/engine/run_modes.h"
#include "frank/engine/v41_model.h"
#include "frank/model/checkpoint.h"
#include "frank/model/loader_v41.h"

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
  for (const auto& dir : fixture_dirs("dsv41"))
    for (const char* mode :
         {"full", "incremental", "chunked:1", "chunked:2", "chunked:3", "chunked:5", "fixture-chunks"})
      cases.push_back({dir, mode});
  return cases;
}

class GoldenV41 : public ::testing::TestWithParam<Case> {};

TEST_P(GoldenV41, LogitsMatchTransformers) {
  const Case& c = GetParam();
  const Fixture f = load_fixture(c.dir);
  // The fixtures carry the Engram token map and multipliers in reference.safetensors.
  auto loaded = model::load_v41_model(c.dir, c.dir / "reference.safetensors");
  ASSERT_EQ(loaded.config.vocab_size, f.vocab);
  const engine::V41Model model(std::move(loaded));

  engine::V41Runner runner(model);
  Tensor logits;
  if (c.mode == "fixture-chunks") {
    logits = fixture_chunk_logits(runner, f);
  } else {
    auto mode = engine::parse_feed_mode(c.mode);
    mode.prefill = f.meta.at("prefill").get<int64_t>();
    logits = engine::sequence_logits(runner, f.vocab, f.ids, mode);
  }

  const LogitComparison r = compare_logits(f, logits, kRelTolerance);
  std::cout << fmt::format("[golden-v41] {} mode {}: {} tokens, max |diff| {:.3g}, max scaled diff {:.3g}\n", f.name(),
                           c.mode, f.ids.size(), r.max_abs, r.max_rel);
  EXPECT_EQ(r.failures, 0) << f.name() << " mode " << c.mode << ": " << r.failures
                           << " logits out of tolerance; first at " << r.first_failure;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenV41, ::testing::ValuesIn(all_cases()), [](const auto& info) {
  std::string name = info.param.dir.filename().string() + "_" + info.param.mode;
  for (auto& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
});

// The session state the KV sources publish: after the whole sequence (fed in transformers' chunks,
// and as prefill + one-token decode), every source's compressed entries and indexer keys equal
// transformers' cache after its one-shot run (reference.safetensors cache.layer{s}.*). Both are
// FP4-rounded: the pre-rounding values agree to ~1e-6 relative, so the rounded ones agree to the
// bit unless an input sits within that of a rounding boundary; a flip would move a value by a
// whole grid step (>= 1/12 of its block's largest value), far above the 1e-5 allowed here.
TEST(GoldenV41State, SourcesPublishTransformersEntriesAndKeys) {
  for (const auto& dir : fixture_dirs("dsv41")) {
    const Fixture f = load_fixture(dir);
    const engine::V41Model model(model::load_v41_model(dir, dir / "reference.safetensors"));
    const auto ref = model::Checkpoint::open_file(dir / "reference.safetensors");
    for (const char* how : {"fixture-chunks", "incremental"}) {
      SCOPED_TRACE(fmt::format("{} {}", f.name(), how));
      engine::V41Session session = model.new_session();
      const int64_t prefill = f.meta.at("prefill").get<int64_t>();
      if (std::string(how) == "incremental") {
        model.forward(session, std::span<const int32_t>(f.ids).first(prefill));
        for (size_t t = prefill; t < f.ids.size(); ++t)
          model.forward(session, std::span<const int32_t>(f.ids).subspan(t, 1));
      } else {
        int64_t begin = 0;
        for (int64_t n : f.meta.at("chunks").get<std::vector<int64_t>>()) {
          model.forward(session, std::span<const int32_t>(f.ids).subspan(begin, n));
          begin += n;
        }
      }
      for (int s : model.config().kv_source_layers) {
        const engine::V41SourceState& state = *session.sources[s];
        for (const auto& [name, got] :
             {std::pair{"entries", &state.entries}, std::pair{"index_keys", &state.index_keys}}) {
          const std::string key = fmt::format("cache.layer{}.{}", s, name);
          const auto* info = ref.find(key);
          ASSERT_NE(info, nullptr) << key;
          const std::vector<float> want = ref.read_f32(key, info->shape);
          ASSERT_EQ(got->size(), want.size()) << key;
          double max_diff = 0.0;
          for (size_t i = 0; i < want.size(); ++i)
            max_diff = std::max(max_diff, double{std::abs((*got)[i] - want[i])} / std::max(1.0f, std::abs(want[i])));
          EXPECT_LE(max_diff, 1e-5) << key;
          std::cout << fmt::format("[golden-v41] {} {} {}: {} values, max scaled diff {:.3g}\n", f.name(), how, key,
                                   want.size(), max_diff);
        }
      }
    }
  }
}

// The golden tests above must not pass by finding nothing.
TEST(GoldenV41Fixtures, AllPresent) {
  EXPECT_GE(fixture_dirs("dsv41").size(), 2u) << "expected the tiny-v41 fixtures under " << fixture_root("dsv41");
}

}  // namespace
}  // namespace frank::test
