// Routing replay (engine/routing_replay.h) on the GPU: CUDA with a trace's experts forced equals the
// CPU reference with the same trace forced, on the golden fixtures, in modes that issue calls eagerly
// (the first call, prefill chunks) and as replayed CUDA graphs (decode steps, whose forced experts are
// uploaded with the step's ids). Skipped, saying so, without a CUDA device.
//
// Tolerance: as test_cuda_forward.cpp's fp32 case, |cuda - cpu| <= 1e-3 * max(1, |cpu|): the same
// experts run on both sides, so what remains is accumulation order (near 1e-5); a layer routed to
// other experts than the CPU's moves the logits by far more (both sides then differ in what they
// compute, not in rounding).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "frank/cuda/cuda_model.h"
#include "frank/engine/routing_replay.h"
#include "frank/engine/run_modes.h"
#include "cuda/cuda_forward_util.h"
#include "golden/fixture.h"

namespace frank::test {
namespace {

// Token i routes, in layer l, to experts (3i + l + j) mod E, j < top_k: distinct, and not what
// the fixture's router picks.
experts::RoutingTrace pattern_trace(const model::ModelConfig& c, int tokens) {
  experts::RoutingTrace t;
  t.source = "pattern";
  t.header = {"test", static_cast<uint32_t>(c.num_layers), static_cast<uint32_t>(c.n_routed_experts),
              static_cast<uint32_t>(c.experts_per_token), 0};
  for (int i = 0; i < tokens; ++i) {
    experts::RoutingStep step{experts::StepKind::Decode, std::vector<std::vector<uint16_t>>(c.num_layers)};
    for (int l = 0; l < c.num_layers; ++l)
      for (int j = 0; j < c.experts_per_token; ++j)
        step.layers[l].push_back(static_cast<uint16_t>((3 * i + l + j) % c.n_routed_experts));
    t.steps.push_back(step);
  }
  return t;
}

class CudaRoutingReplay : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaRoutingReplay, ForcedCudaLogitsMatchTheForcedCpuReference) {
  REQUIRE_GPU();
  const auto dirs = fixture_dirs();
  ASSERT_FALSE(dirs.empty()) << "no golden fixtures";
  const Fixture f = load_fixture(dirs.front());
  const auto model = load(dirs.front());
  engine::Model& m = *model;
  const auto mode = engine::parse_feed_mode(GetParam());
  // Fewer trace tokens than the fixture has ids: the replay wraps around during the run.
  const experts::RoutingTrace trace = pattern_trace(m.config(), 5);

  const Tensor unforced = engine::sequence_logits(m, f.ids, mode);
  engine::RoutingReplay cpu_replay(trace, m.config());
  m.replay_routing(&cpu_replay);
  const Tensor want = engine::sequence_logits(m, f.ids, mode);
  m.replay_routing(nullptr);

  cuda::CudaModel device(m, cuda::WeightType::F32);
  engine::RoutingReplay gpu_replay(trace, m.config());
  device.replay_routing(&gpu_replay);
  cuda::CudaRunner runner(device);
  const Tensor got = engine::sequence_logits(runner, f.vocab, f.ids, mode);
  int64_t graphs = 0;
  for (const cuda::StepTime& t : device.step_times()) graphs += t.graph ? 1 : 0;

  const Worst w = compare(got, want);
  const Worst moved = compare(unforced, want);
  std::cout << fmt::format("[ replay ] {} {}: max scaled |cuda - cpu| = {:.3g} ({} of {} calls graph-replayed); the "
                           "forced routing moved the CPU's logits by {:.3g}\n",
                           f.name(), GetParam(), w.err, graphs, device.step_times().size(), moved.err);
  EXPECT_LE(w.err, 1e-3) << "position " << w.row << " logit " << w.col;
  EXPECT_GT(moved.err, 1e-2) << "the forced experts should change the logits";
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaRoutingReplay, ::testing::Values("full", "incremental", "chunked:3"));

}  // namespace
}  // namespace frank::test
