// Routed experts split between GPU and CPU by a plan (issue 7; cuda/cpu_experts.h): on every golden
// fixture, with a third of the routed experts homed on the CPU (the default ordering), the logits
// equal the CPU reference and the all-GPU run, fed in full and incrementally; the CPU-homed experts
// never reach device memory; a bad placement is refused. Skipped, saying so, without a CUDA device.
//
// Tolerance: fp32 weights, |split - reference| <= 1e-3 * max(1, |reference|), the CUDA forward's own
// (test_cuda_forward.cpp). The split changes only where the routed sum is added: the GPU's experts
// in its order, the CPU's in ascending expert id (the reference's order, in fp32), then the two
// summed: a different order of k + 1 fp32 additions per value, rounding-level; a lost or doubled
// expert moves logits by far more. FP4 experts run on the CPU's fast kernels (fp32 sums within the
// bound of quant_gemv.h), well inside the same tolerance.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "frank/core/error.h"
#include "frank/cuda/cuda_model.h"
#include "frank/engine/run_modes.h"
#include "frank/experts/baseline_plans.h"
#include "frank/experts/expert_homes.h"
#include "frank/experts/model_fingerprint.h"
#include "cuda/cuda_forward_util.h"
#include "cuda/frank_binary.h"
#include "golden/fixture.h"

namespace frank::test {
namespace {

// A third of the model's routed experts on the CPU, spread evenly (the default ordering).
experts::ExpertHomes third_on_cpu(const model::ModelConfig& c) {
  const size_t total = static_cast<size_t>(c.num_layers) * c.n_routed_experts;
  return experts::ExpertHomes(experts::default_plan(experts::model_fingerprint(c), static_cast<uint32_t>(c.num_layers),
                                                    static_cast<uint32_t>(c.n_routed_experts), total / 3),
                              c);
}

TEST(CudaHybrid, AThirdOfTheExpertsOnTheCpuGivesTheSameLogits) {
  REQUIRE_GPU();
  for (const auto& dir : fixture_dirs()) {
    const Fixture f = load_fixture(dir);
    const auto model = load(dir);
    const model::ModelConfig& c = model->config();
    for (const char* mode : {"full", "incremental"}) {
      const auto feed = engine::parse_feed_mode(mode);
      const Tensor reference = engine::sequence_logits(*model, f.ids, feed);
      cuda::CudaModel all_gpu(*model, cuda::WeightType::F32);
      cuda::CudaRunner all_gpu_run(all_gpu);
      const Tensor gpu_only = engine::sequence_logits(all_gpu_run, f.vocab, f.ids, feed);

      cuda::CudaModel split(*model, cuda::WeightType::F32);
      experts::ExpertHomes homes = third_on_cpu(c);
      const size_t cpu_count = homes.cpu_count();
      int split_layers = 0;  // each keeps a device copy of its home flags, one byte per expert
      for (int l = 0; l < c.num_layers; ++l) split_layers += homes.cpu_count(l) > 0 ? 1 : 0;
      split.device_weights().set_cpu_experts(std::make_unique<cuda::CpuExperts>(c, model->weights(), std::move(homes), 2));
      cuda::CudaRunner split_run(split);
      const Tensor got = engine::sequence_logits(split_run, f.vocab, f.ids, feed);
      const cuda::CpuExperts::Times times = split.device_weights().cpu_experts()->take_times();

      const Worst vs_reference = compare(got, reference), vs_gpu = compare(got, gpu_only);
      // The CPU-homed experts were never uploaded: the device holds exactly their fp32 bytes less,
      // plus the home flags of the split layers.
      const double expert_bytes = 3.0 * c.moe_intermediate_size * c.hidden_size * 4;
      const double saved = static_cast<double>(all_gpu.weight_bytes()) - static_cast<double>(split.weight_bytes());
      std::cout << fmt::format(
          "[ split ] {} {}: {} of {} experts on the CPU ran {} times over {} layer calls ({:.2f} ms computing, "
          "{:.2f} ms waiting); max scaled |split - cpu reference| = {:.3g}, |split - all-gpu| = {:.3g}; "
          "{:.0f} weight bytes not on the GPU\n",
          f.name(), mode, cpu_count, c.num_layers * c.n_routed_experts, times.experts, times.layers,
          times.compute_seconds * 1e3, times.wait_seconds * 1e3, vs_reference.err, vs_gpu.err, saved);
      EXPECT_LE(vs_reference.err, 1e-3) << f.name() << " " << mode << ": position " << vs_reference.row;
      EXPECT_LE(vs_gpu.err, 1e-3) << f.name() << " " << mode << ": position " << vs_gpu.row;
      EXPECT_GT(times.experts, 0) << "no CPU-homed expert was chosen: the split was not exercised";
      EXPECT_EQ(saved, static_cast<double>(cpu_count) * expert_bytes - static_cast<double>(split_layers) * c.n_routed_experts);
      EXPECT_TRUE(std::none_of(split.step_times().begin(), split.step_times().end(),
                               [](const cuda::StepTime& t) { return t.graph; }))
          << "steps with CPU experts must be issued eagerly";
    }
  }
}

TEST(CudaHybrid, HomesAreFixedBeforeTheFirstStep) {
  REQUIRE_GPU();
  const auto dirs = fixture_dirs();
  ASSERT_FALSE(dirs.empty());
  const Fixture f = load_fixture(dirs.front());
  const auto model = load(dirs.front());
  cuda::CudaModel gpu(*model, cuda::WeightType::F32);
  cuda::CudaRunner runner(gpu);
  runner.forward(std::vector<int32_t>(f.ids.begin(), f.ids.begin() + 2), engine::Model::Logits::Last);
  EXPECT_THROW(gpu.device_weights().set_cpu_experts(
                   std::make_unique<cuda::CpuExperts>(model->config(), model->weights(), third_on_cpu(model->config()))),
               Error);
}

// The `frank` binary ($FRANK_BINARY, beside this test, or the build tree's) refuses bad placements at start with the problem named (the CLI path of
// --plan / --gpu-memory-budget; every kind of bad plan is covered by test_expert_homes.cpp).
TEST(CudaHybrid, TheCommandLineRefusesABadPlanAtStart) {
  REQUIRE_GPU();
  const auto dirs = fixture_dirs();
  ASSERT_FALSE(dirs.empty());
  const std::string plan = (std::filesystem::temp_directory_path() / "frank-hybrid-bad-plan.json").string();
  std::ofstream(plan) << R"({"format": "frank-expert-plan", "version": 1, "model_fingerprint": "deepseek_v4/43x256/top6",
    "n_layers": 43, "n_experts": 256, "cpu_expert_count": 0, "layers": []})";
  for (const std::string& args : {"--plan " + plan, std::string("--gpu-memory-budget 0.000001")}) {
    const std::string out = (std::filesystem::temp_directory_path() / "frank-hybrid-bad-plan.out").string();
    const std::string command = fmt::format("{} logits --model {} --ids 1,2 --backend cuda {} --out /dev/null >{} 2>&1",
                                            frank_binary().string(), dirs.front().string(), args, out);
    const int rc = std::system(command.c_str());
    std::ifstream in(out);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::cout << "[ bad placement ] " << args << ": " << text;
    EXPECT_EQ(WEXITSTATUS(rc), 1) << text;
    EXPECT_NE(text.find(args.starts_with("--plan") ? "model_fingerprint" : "is too small"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace frank::test
