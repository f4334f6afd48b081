// The DeepSeek-V4.1 forward on CUDA (CudaV41Model) against the CPU reference (V41Model, which
// matches transformers on the same fixtures: tests/golden/test_golden_v41.cpp), fed in full,
// incremental and chunked modes; the fused candidate-block selection and the mHC overlap against
// the plain paths; greedy decoding on both; a refused call. Skipped, saying so, without a CUDA device.
//
// Tolerances as for V4 (test_cuda_forward.cpp): fp32 weights |cuda - cpu| <= 1e-3 * max(1, |cpu|)
// (accumulation order only: the FP8/FP4 rounding the forward bakes in is bit-exact on both, so it
// adds nothing unless a value lands within an fp32 ulp of a rounding boundary); bf16 weights
// against the CPU run on the same bf16-rounded weights, <= 2e-2 * max(1, |cpu|). The fused and
// unfused selections must give the same logits bit for bit (they choose the same entries, and
// everything after is the same kernels), and so must the mHC overlap (the same kernels on two
// streams).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>

#include "cuda/cuda_forward_util.h"
#include "cuda/cuda_v41_util.h"
#include "frank/cuda/cuda_v41_model.h"
#include "frank/engine/run_modes.h"
#include "frank/engine/sampling.h"
#include "frank/engine/v41_model.h"
#include "frank/model/loader_v41.h"
#include "golden/fixture.h"

namespace frank::test {
namespace {

struct Case {
  std::filesystem::path dir;
  std::string mode;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.dir.filename().string() << " " << c.mode; }

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& dir : fixture_dirs("dsv41"))
    for (const char* mode : {"full", "incremental", "chunked:1", "chunked:2", "chunked:3", "chunked:5"})
      cases.push_back({dir, mode});
  return cases;
}

engine::FeedMode feed_mode(const Fixture& f, const std::string& text) {
  auto mode = engine::parse_feed_mode(text);
  mode.prefill = f.meta.at("prefill").get<int64_t>();
  return mode;
}

// The variants a CudaV41Model offers that must not change a bit of the logits.
struct Variant {
  bool fused_candidates = true;
  bool mhc_overlap = false;
};

Tensor gpu_logits(const engine::V41Model& model, cuda::WeightType type, const Fixture& f, const std::string& mode,
                  Variant v = {}) {
  cuda::CudaV41Model device(model, type);
  device.set_fused_candidates(v.fused_candidates);
  device.set_mhc_overlap(v.mhc_overlap);
  cuda::CudaV41Runner runner(device);
  return engine::sequence_logits(runner, f.vocab, f.ids, feed_mode(f, mode));
}

Tensor cpu_logits(const engine::V41Model& model, const Fixture& f, const std::string& mode) {
  engine::V41Runner runner(model);
  return engine::sequence_logits(runner, f.vocab, f.ids, feed_mode(f, mode));
}

class CudaV41Golden : public ::testing::TestWithParam<Case> {};

TEST_P(CudaV41Golden, Fp32LogitsMatchTheCpuReference) {
  REQUIRE_GPU();
  const Case& c = GetParam();
  const Fixture f = load_fixture(c.dir);
  const engine::V41Model model(load_v41(c.dir));
  const Worst w = compare(gpu_logits(model, cuda::WeightType::F32, f, c.mode), cpu_logits(model, f, c.mode));
  std::cout << fmt::format("[ v41 fp32 ] {} {}: max scaled |cuda - cpu| = {:.3g}\n", f.name(), c.mode, w.err);
  EXPECT_LE(w.err, 1e-3) << f.name() << " " << c.mode << ": position " << w.row << " logit " << w.col;
}

TEST_P(CudaV41Golden, Bf16LogitsMatchTheCpuReferenceOnRoundedWeights) {
  REQUIRE_GPU();
  const Case& c = GetParam();
  if (c.mode != "full" && c.mode != "chunked:3") GTEST_SKIP() << "bf16 is checked in two modes";
  const Fixture f = load_fixture(c.dir);
  const engine::V41Model model(load_v41(c.dir));
  auto loaded = load_v41(c.dir);
  model::for_each_v41_weight(loaded.config, loaded.weights, [](const model::WeightSlot& slot) {
    if (slot.linear != nullptr)
      for (float& v : slot.linear->dense.data) v = bf16_round(v);
  });
  const engine::V41Model rounded(std::move(loaded));
  const Worst w = compare(gpu_logits(model, cuda::WeightType::BF16, f, c.mode), cpu_logits(rounded, f, c.mode));
  std::cout << fmt::format("[ v41 bf16 ] {} {}: max scaled |cuda - cpu(bf16 weights)| = {:.3g}\n", f.name(), c.mode,
                           w.err);
  EXPECT_LE(w.err, 2e-2) << f.name() << " " << c.mode << ": position " << w.row << " logit " << w.col;
}

// The fused candidate-block selection against a mask and the plain selection, and the mHC overlap
// (hc_map on a side stream) against the plain order: the same logits bit for bit.
TEST_P(CudaV41Golden, VariantsGiveTheSameLogitsBitForBit) {
  REQUIRE_GPU();
  const Case& c = GetParam();
  const Fixture f = load_fixture(c.dir);
  const engine::V41Model model(load_v41(c.dir));
  const Tensor plain = gpu_logits(model, cuda::WeightType::F32, f, c.mode);
  for (const auto& [name, variant] : {std::pair{"unfused candidate selection", Variant{false, false}},
                                      std::pair{"mHC overlap", Variant{true, true}}}) {
    const Tensor got = gpu_logits(model, cuda::WeightType::F32, f, c.mode, variant);
    ASSERT_EQ(got.numel(), plain.numel());
    EXPECT_EQ(std::memcmp(got.data.data(), plain.data.data(), plain.data.size() * sizeof(float)), 0)
        << f.name() << " " << c.mode << ": " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaV41Golden, ::testing::ValuesIn(all_cases()));

// Greedy continuation of each fixture's prompt on both backends: the same tokens, unless they part
// at a near-tie (top-2 gap of the CPU logits below the fp32 tolerance), which is then reported.
TEST(CudaV41Greedy, SameTokensAsTheCpuReference) {
  REQUIRE_GPU();
  for (const auto& dir : fixture_dirs("dsv41")) {
    const Fixture f = load_fixture(dir);
    const engine::V41Model model(load_v41(dir));
    cuda::CudaV41Model gpu(model, cuda::WeightType::F32);
    engine::V41Runner cpu_run(model);
    cuda::CudaV41Runner gpu_run(gpu);
    std::vector<int32_t> next(f.ids.begin(), f.ids.begin() + 4);
    for (int step = 0; step < 24; ++step) {
      const Tensor lc = cpu_run.forward(next, engine::Model::Logits::Last);
      const Tensor lg = gpu_run.forward(next, engine::Model::Logits::Last);
      const auto row_c = std::span<const float>(lc.row(0), lc.cols());
      const int32_t tc = engine::argmax(row_c), tg = engine::argmax(std::span<const float>(lg.row(0), lg.cols()));
      if (tokens_part(row_c, tc, tg, fmt::format("{} step {}", f.name(), step))) break;
      next = {tc};
    }
  }
}

// A call the model refuses (an id outside the vocabulary) throws and leaves the session as it was:
// the next call gives what it gives on a fresh session fed the same ids.
TEST(CudaV41Errors, RefusedCallLeavesTheSessionUntouched) {
  REQUIRE_GPU();
  const auto dirs = fixture_dirs("dsv41");
  ASSERT_FALSE(dirs.empty());
  const Fixture f = load_fixture(dirs.front());
  const engine::V41Model model(load_v41(dirs.front()));
  cuda::CudaV41Model gpu(model, cuda::WeightType::F32);
  cuda::DeviceV41Session session = gpu.new_session();
  const std::vector<int32_t> bad = {0, static_cast<int32_t>(f.vocab)};
  EXPECT_THROW(gpu.forward(session, bad, engine::Model::Logits::All), Error);
  EXPECT_EQ(session.position, 0);
  const std::vector<int32_t> ids(f.ids.begin(), f.ids.begin() + 3);
  const Tensor after = gpu.forward(session, ids, engine::Model::Logits::All);
  cuda::DeviceV41Session fresh = gpu.new_session();
  const Tensor want = gpu.forward(fresh, ids, engine::Model::Logits::All);
  EXPECT_EQ(std::memcmp(after.data.data(), want.data.data(), want.data.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace frank::test
