// Engram (dsv41-model.md §6): the n-gram hash against transformers' exported row ids, in one call
// and across chunks, and the gated mix against hand-derived values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "frank/core/error.h"
#include "frank/engine/engram.h"
#include "frank/model/checkpoint.h"
#include "frank/model/loader_v41.h"

namespace frank::engine {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kFixtures = std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv41";

struct HashFixture {
  model::EngramLayout layout;
  std::vector<int32_t> ids;
  std::vector<int64_t> hf_hash_ids;  // [T, layers, columns], transformers' call without a cache
};

HashFixture hash_fixture(const char* name) {
  const auto dir = kFixtures / name;
  const auto config = model::load_v41_config(dir);
  HashFixture f;
  f.layout = model::load_engram_layout(config, dir / "reference.safetensors");
  const auto ref = model::Checkpoint::open_file(dir / "reference.safetensors");
  const auto ids = ref.read_i64("ids", ref.find("ids")->shape);
  f.ids.assign(ids.begin(), ids.end());
  f.hf_hash_ids = ref.read_i64("engram.hash_ids", ref.find("engram.hash_ids")->shape);
  return f;
}

TEST(Engram, HashIdsMatchTransformers) {
  for (const char* name : {"tiny-v41", "tiny-v41-native"}) {
    SCOPED_TRACE(name);
    const auto f = hash_fixture(name);
    auto history = engram_fresh_history(f.layout);
    EXPECT_EQ(engram_hash_ids(f.layout, f.ids, history), f.hf_hash_ids);
  }
}

TEST(Engram, HashIdsAcrossChunksEqualOneCall) {
  // The fixtures' chunkings (golden.json "chunks"): n-grams span the chunk boundaries, so the
  // look-back must carry the previous call's last classes.
  const std::vector<std::pair<const char*, std::vector<int>>> cases = {
      {"tiny-v41", {7, 1, 13, 27}}, {"tiny-v41-native", {1, 5, 2, 9, 11, 3, 25}}};
  for (const auto& [name, chunks] : cases) {
    SCOPED_TRACE(name);
    const auto f = hash_fixture(name);
    auto history = engram_fresh_history(f.layout);
    std::vector<int64_t> all;
    size_t start = 0;
    for (int n : chunks) {
      const auto part = engram_hash_ids(f.layout, std::span(f.ids).subspan(start, n), history);
      all.insert(all.end(), part.begin(), part.end());
      start += n;
    }
    EXPECT_EQ(all, f.hf_hash_ids);
  }
}

// transformers' Engram modules, captured in the fixtures' one-shot run (reference.safetensors
// engram.layer{l}.{rows,streams_in,streams_out}): the rows our hash ids gather, and the mix.
TEST(Engram, GatherAndMixMatchTransformers) {
  for (const char* name : {"tiny-v41", "tiny-v41-native"}) {
    SCOPED_TRACE(name);
    const auto dir = kFixtures / name;
    const auto m = model::load_v41_model(dir, dir / "reference.safetensors");
    const auto f = hash_fixture(name);
    auto history = engram_fresh_history(m.engram);
    const auto hash = engram_hash_ids(m.engram, f.ids, history);
    const auto ref = model::Checkpoint::open_file(dir / "reference.safetensors");
    const auto& c = m.config;
    const int T = static_cast<int>(f.ids.size()), L = static_cast<int>(c.engram.layer_ids.size());
    const int cols = c.engram.hash_columns(), width = cols * c.engram.head_dim, S = c.hc_mult * c.hidden_size;
    double worst = 0.0;
    for (int k = 0; k < L; ++k) {
      const int layer = c.engram.layer_ids[k];
      const auto& w = *m.weights.layers[layer].engram;
      const auto key = [&](const char* what) { return fmt::format("engram.layer{}.{}", layer, what); };
      const auto rows = ref.read_f32(key("rows"), {T, cols, c.engram.head_dim});
      const auto in = ref.read_f32(key("streams_in"), {T, c.hc_mult, c.hidden_size});
      const auto out = ref.read_f32(key("streams_out"), {T, c.hc_mult, c.hidden_size});
      for (int t = 0; t < T; ++t) {
        const auto ids = std::span(hash).subspan((static_cast<size_t>(t) * L + k) * cols, cols);
        const auto gathered = engram_gather(w.table, ids);
        ASSERT_EQ(gathered, std::vector<float>(rows.begin() + t * width, rows.begin() + (t + 1) * width)) << t;
        std::vector<float> streams(in.begin() + t * S, in.begin() + (t + 1) * S);
        engram_mix(w, gathered, c.hc_mult, c.hidden_size, c.rms_norm_eps, streams.data());
        for (int i = 0; i < S; ++i) {
          const double want = out[t * S + i];
          const double scaled = std::fabs(streams[i] - want) / std::max(1.0, std::fabs(want));
          worst = std::max(worst, scaled);
          // transformers sums in fp32, frank in double: the stream, key and value agree to a few fp32
          // ulps and the gate (a sigmoid of a square root) does not amplify that; 1e-5 leaves margin
          // over the measured 1.1e-6 and is far below a wrong gate (without the signed square root: 2.3e-2).
          ASSERT_LE(scaled, 1e-5) << "layer " << layer << " token " << t << " value " << i;
        }
      }
    }
    std::printf("%s: Engram mix, max |frank - transformers| / max(1, |x|) = %.3g\n", name, worst);
  }
}

TEST(Engram, FirstPositionHashesThePadClass) {
  // Before the sequence start every look-back slot is the pad class, so position 0's 2-gram hash is
  // (c0·m0 XOR pad·m1) mod p + offset: worked out here from the layout, independently of the loop.
  const auto f = hash_fixture("tiny-v41");
  const auto& L = f.layout;
  const int64_t c0 = L.token_map[f.ids[0]];
  const int64_t expect = ((c0 * L.multiplier[0][0]) ^ (int64_t{L.pad_class} * L.multiplier[0][1])) % L.modulus[0][0];
  auto history = engram_fresh_history(L);
  EXPECT_EQ(engram_hash_ids(L, std::span(f.ids).first(1), history)[0], expect + L.offset[0][0]);
}

TEST(Engram, IdOutsideTheTokenMapIsAnError) {
  const auto f = hash_fixture("tiny-v41");
  auto history = engram_fresh_history(f.layout);
  const std::vector<int32_t> ids{3, 31};
  try {
    engram_hash_ids(f.layout, ids, history);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("token id 31 is outside the token map (31 ids)"));
  }
}

TEST(Engram, GatherConcatenatesRowsAndChecksRange) {
  Tensor table({3, 2}, {0, 1, 10, 11, 20, 21});
  const std::vector<int64_t> rows{2, 0};
  EXPECT_EQ(engram_gather(table, rows), (std::vector<float>{20, 21, 0, 1}));
  const std::vector<int64_t> bad{3};
  EXPECT_THROW(engram_gather(table, bad), Error);
}

// Three streams of width 2, one gathered row e = [1, 0]. wkv gives key_0 = e, key_1 = -e,
// key_2 = [-1, +0] and v = [2, 0]. Each stream's gate is derived by hand from the formula in engram.h.
TEST(Engram, MixGatesEachStreamByItsOwnKey) {
  model::V41EngramWeights w;
  w.wkv = LinearWeight(Tensor({8, 2}, {1, 0, 0, 1,     // key_0 = I e
                                       -1, 0, 0, -1,   // key_1 = -I e
                                       -1, 0, 0, 1,    // key_2 = [-1, +0]
                                       2, 0, 0, 3}));  // v = [2, 0]
  w.q_weight = Tensor({3, 2}, {2, 1, 1, 1, 1, 1});
  w.k_weight = Tensor({3, 2}, {0.5f, 3, 1, 1, 1, 1});
  std::vector<float> streams{3, 4, 1, -1, 0, 5};
  const std::vector<float> gathered{1, 0};
  const float eps = 1e-20f;
  engram_mix(w, gathered, 3, 2, eps, streams.data());

  const auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  // Stream 0: Σ x·(q·k)·key = 3·1·1 = 3; rsqrt(mean x²) = 1/√12.5, rsqrt(mean key²) = √2, /√2:
  // dot = 3/√12.5 > 0.
  const double g0 = sigmoid(std::sqrt(3.0 / std::sqrt(12.5)));
  // Stream 1: Σ = 1·1·(-1) = -1; rsqrt(mean x²) = 1, √2, /√2: dot = -1.
  const double g1 = sigmoid(-1.0);
  // Stream 2: x = [0, 5] ⟂ key, the products are -0 and +0, dot = +0: the clamp gives sqrt(1e-6) =
  // 1e-3 with the sign of +0.
  const double g2 = sigmoid(1e-3);
  const std::vector<double> expect{3 + 2 * g0, 4, 1 + 2 * g1, -1, 0 + 2 * g2, 5};
  // fp32 arithmetic against exact doubles: a few ulps of values below 10.
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(streams[i], expect[i], 4e-6) << i;
}

}  // namespace
}  // namespace frank::engine
