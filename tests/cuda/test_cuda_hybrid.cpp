// Routed experts split between GPU and CPU by a plan (issue 7; cuda/cpu_experts.h): on every golden
// fixture, with a third of the routed experts homed on the CPU (the default ordering), the logits
// equal the CPU reference and the all-GPU run, fed in full and incrementally (decode steps replayed
// as CUDA graphs); the CPU-homed experts never reach device memory; a bad placement is refused. A
// split step replayed from a graph gives the eager split step's bits, and every replay's layers
// reach the host (the handshake's sequence numbers advance); a GPU wait the host will not serve is
// released when the CPU experts are destroyed. With GPU cache slots (expert_cache_slots.h) the
// logits stay the all-GPU run's while experts are admitted and evicted, eagerly and in graphs, the
// counters add up against the routings read back from the device, and the admissions are
// experts::ExpertCache's (the simulator's policy) for the same routings. Skipped, saying so,
// without a CUDA device.
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
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "frank/core/error.h"
#include "frank/cuda/cuda_model.h"
#include "frank/engine/run_modes.h"
#include "frank/experts/baseline_plans.h"
#include "frank/experts/expert_cache.h"
#include "frank/experts/expert_homes.h"
#include "frank/experts/model_fingerprint.h"
#include "frank/model/synthetic.h"
#include "frank/model/synthetic_exl3.h"
#include "cuda/cuda_forward_util.h"
#include "cuda/frank_binary.h"
#include "golden/fixture.h"

namespace frank::test {
namespace {

int64_t replayed(const cuda::CudaModel& m) {
  return std::count_if(m.step_times().begin(), m.step_times().end(), [](const cuda::StepTime& t) { return t.graph; });
}

int split_layers(const experts::ExpertHomes& homes) {
  int n = 0;
  for (int l = 0; l < homes.n_layers(); ++l) n += homes.cpu_count(l) > 0 ? 1 : 0;
  return n;
}

// Runs `f` on another thread; a call that does not return within `limit` fails the test and ends
// the process (a hung handshake would otherwise hang the whole suite).
template <class F>
void returns_within(std::chrono::seconds limit, const std::string& what, F f) {
  auto done = std::async(std::launch::async, std::move(f));
  if (done.wait_for(limit) == std::future_status::timeout) {
    ADD_FAILURE() << what << " did not return within " << limit.count() << " s";
    std::cout.flush();
    std::_Exit(1);
  }
  done.get();
}

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
      const int flagged_layers = split_layers(homes);  // each keeps a device copy of its flags, a byte an expert
      split.device_weights().set_cpu_experts(std::make_unique<cuda::CpuExperts>(c, model->weights(), std::move(homes), 2));
      cuda::CudaRunner split_run(split);
      const Tensor got = engine::sequence_logits(split_run, f.vocab, f.ids, feed);
      const cuda::CpuExperts::Times times = split.device_weights().cpu_experts()->take_times();

      const Worst vs_reference = compare(got, reference), vs_gpu = compare(got, gpu_only);
      // The CPU-homed experts were never uploaded: the device holds exactly their bytes less, as the
      // layer's table stores routed experts (fp32, or FP4 as shipped by the FP8 / FP4 fixtures),
      // plus the home flags of the split layers.
      double cpu_expert_bytes = 0;
      for (int l = 0; l < c.num_layers; ++l) {
        const model::MoeWeights& moe = model->weights().layers[static_cast<size_t>(l)].moe;
        const cuda::WeightType type = split.device_weights().experts(moe).type;
        for (int e = 0; e < c.n_routed_experts; ++e)
          if (split.device_weights().cpu_experts()->homes().on_cpu(l, e)) {
            const model::ExpertWeights& x = moe.experts[static_cast<size_t>(e)];
            for (const LinearWeight* m : {&x.gate, &x.up, &x.down})
              cpu_expert_bytes += static_cast<double>(cuda::weight_bytes(type, m->rows(), m->cols()));
          }
      }
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
      EXPECT_EQ(saved, cpu_expert_bytes - static_cast<double>(flagged_layers) * c.n_routed_experts);
      // Fed a token a call, every call after the first replays (or captures) a graph.
      if (std::string_view(mode) == "incremental") {
        EXPECT_EQ(replayed(split), std::ssize(split.step_times()) - 1) << f.name() << ": split steps ran eagerly";
      }
    }
  }
}

// One prompt fed a token per step, twice (two sessions, one cache), through a split model with
// cache slots and through the all-GPU model. Per step it checks against the routings the device
// kept (LayerState::last_experts, read back independently of the host's copy) and against a
// reference experts::ExpertCache fed the same routings:
//   - logits: the all-GPU run's, within the hybrid tolerance above (a cached expert computed on
//     the GPU is the all-GPU model's computation of it; a lost, doubled or wrongly copied expert
//     moves the logits far more);
//   - hits: the routings to CPU-homed experts the reference cache held when the step ran, misses
//     the rest (so hits + misses = the routings to CPU-homed experts);
//   - admissions: the experts the reference newly holds after the step.
struct CachedRun {
  size_t steps = 0, evictions = 0, fills = 0;
  uint64_t hits = 0, misses = 0, zero_miss_steps = 0, second_pass_misses = 0, second_pass_hits = 0;
};

CachedRun run_with_cache(const std::filesystem::path& dir, size_t slots, const experts::CachePolicy& policy) {
  const Fixture f = load_fixture(dir);
  const auto model = load(dir);
  const model::ModelConfig& c = model->config();
  const int E = c.n_routed_experts;
  cuda::CudaModel all_gpu(*model, cuda::WeightType::F32);
  // Eager: the routings are read back from LayerState::last_experts, which a graph does not keep
  // (CudaModelGraphs below runs the cache in graphs).
  cuda::CudaModel split(*model, cuda::WeightType::F32, 0, {.enabled = false});
  const experts::ExpertHomes homes = third_on_cpu(c);
  split.device_weights().set_cpu_experts(std::make_unique<cuda::CpuExperts>(c, model->weights(), homes, 2));
  split.device_weights().set_expert_cache(slots, policy);
  const cuda::ExpertCacheSlots* cache = split.device_weights().expert_cache();
  EXPECT_NE(cache, nullptr);
  if (cache == nullptr) return {};
  experts::ExpertCache reference(static_cast<size_t>(c.num_layers) * E, cache->slots(), policy);

  CachedRun run;
  for (int pass = 0; pass < 2; ++pass) {
    cuda::DeviceSession gpu_session = all_gpu.new_session(), split_session = split.new_session();
    for (const int32_t id : f.ids) {
      const std::vector<int32_t> one{id};
      const Tensor want = all_gpu.forward(gpu_session, one, engine::Model::Logits::Last);
      const Tensor got = split.forward(split_session, one, engine::Model::Logits::Last);
      const Worst err = compare(got, want);
      EXPECT_LE(err.err, 1e-3) << "step " << run.steps << " (pass " << pass << ")";

      std::vector<uint32_t> used;  // distinct CPU-homed experts, ascending
      uint64_t hits = 0, misses = 0;
      for (int l = 0; l < c.num_layers; ++l) {
        const auto& kept = split_session.layers[static_cast<size_t>(l)].last_experts;
        std::vector<int32_t> chosen(static_cast<size_t>(kept.numel()));
        kept.copy_to_host(chosen.data());
        EXPECT_EQ(cudaStreamSynchronize(kept.stream()), cudaSuccess);
        std::set<uint32_t> layer_used;
        for (const int32_t e : chosen) {
          if (e < 0 || e >= E || !homes.on_cpu(l, e)) continue;
          const uint32_t key = static_cast<uint32_t>(l * E + e);
          (reference.holds(key) ? hits : misses) += 1;
          layer_used.insert(key);
        }
        used.insert(used.end(), layer_used.begin(), layer_used.end());
      }
      std::vector<uint32_t> held_before;
      for (const uint32_t key : used)
        if (reference.holds(key)) held_before.push_back(key);
      reference.end_step(used);
      std::vector<uint32_t> admitted;
      for (const uint32_t key : used)
        if (reference.holds(key) && !std::binary_search(held_before.begin(), held_before.end(), key))
          admitted.push_back(key);
      EXPECT_EQ(cache->last_fills(), admitted) << "step " << run.steps;

      const auto counted = cache->counters();
      EXPECT_EQ(counted.hit_routings - run.hits, hits) << "step " << run.steps;
      EXPECT_EQ(counted.miss_routings - run.misses, misses) << "step " << run.steps;
      EXPECT_EQ(counted.zero_miss_steps - run.zero_miss_steps, misses == 0 ? 1u : 0u) << "step " << run.steps;
      run.hits = counted.hit_routings;
      run.misses = counted.miss_routings;
      run.zero_miss_steps = counted.zero_miss_steps;
      if (pass == 1) {
        run.second_pass_hits += hits;
        run.second_pass_misses += misses;
      }
      run.steps += 1;
    }
  }
  run.fills = cache->counters().fills;
  run.evictions = cache->counters().evictions;
  EXPECT_EQ(cache->counters().steps, run.steps);
  std::cout << fmt::format("[ cache ] {}: {} slots, {} steps: {} hits, {} misses ({} in the second pass), {} steps "
                           "with no miss, {} fills, {} evictions\n",
                           f.name(), cache->slots(), run.steps, run.hits, run.misses, run.second_pass_misses,
                           run.zero_miss_steps, run.fills, run.evictions);
  return run;
}

// Two slots, a short half-life: experts come and go every few steps.
TEST(CudaHybridCache, LogitsStayTheAllGpuRunsWhileExpertsAreAdmittedAndEvicted) {
  REQUIRE_GPU();
  const auto dirs = fixture_dirs();
  ASSERT_FALSE(dirs.empty());
  const CachedRun run = run_with_cache(dirs.front(), 2, {.half_life_steps = 1, .max_fills_per_step = 2});
  EXPECT_GT(run.hits, 0u) << "no routing ran on a GPU copy: the cache was not exercised";
  EXPECT_GT(run.evictions, 0u) << "nothing was evicted: the churn was not exercised";
}

// A slot for every CPU-homed expert: after the first pass every expert it used has a copy (there is
// a free slot for each, and a one-token step of tiny-v4 routes to at most 6 layers x top-2 = 12
// experts, fewer than max_fills_per_step = 16),
// so the repeated prompt, routed the same way, never misses.
TEST(CudaHybridCache, ARepeatedPromptHitsAfterWarmUp) {
  REQUIRE_GPU();
  const auto dirs = fixture_dirs();
  ASSERT_FALSE(dirs.empty());
  const CachedRun run = run_with_cache(dirs.front(), 100000, {});
  EXPECT_GT(run.second_pass_hits, 0u);
  EXPECT_EQ(run.second_pass_misses, 0u);
  EXPECT_EQ(run.evictions, 0u);
}

// The policy's bookkeeping is checked step by step inside run_with_cache (admissions equal the
// reference ExpertCache's); here with a policy that admits at most one expert a step.
TEST(CudaHybridCache, AdmissionsAreTheSimulatorsExpertCaches) {
  REQUIRE_GPU();
  const auto dirs = fixture_dirs();
  ASSERT_FALSE(dirs.empty());
  const CachedRun run = run_with_cache(dirs.front(), 3, {.half_life_steps = 4, .max_fills_per_step = 1});
  EXPECT_GT(run.fills, 0u);
}

// Feeds `ids` twice, one token a call, to an all-GPU model and to a split one (a third of the experts
// on the CPU) with two GPU cache slots and a half-life of one step, so experts come and go while the
// split model replays its decode steps. The cache's changes between steps (table entries, home
// flags, the host's runs_on_cpu) must reach the graphs replayed after them: every logit stays the
// all-GPU run's within the hybrid tolerance (an expert the GPU ran from a slot the host also ran, or
// neither did, moves them far more), and the cache must have hit and evicted.
void churn_cache_in_graphs(const engine::Model& model, std::span<const int32_t> ids, const std::string& name) {
  const model::ModelConfig& c = model.config();
  cuda::CudaModel all_gpu(model, cuda::WeightType::F32);
  cuda::CudaModel split(model, cuda::WeightType::F32);
  split.device_weights().set_cpu_experts(std::make_unique<cuda::CpuExperts>(c, model.weights(), third_on_cpu(c), 2));
  split.device_weights().set_expert_cache(2, {.half_life_steps = 1, .max_fills_per_step = 2});
  for (int pass = 0; pass < 2; ++pass) {
    cuda::DeviceSession gpu_session = all_gpu.new_session(), split_session = split.new_session();
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::vector<int32_t> one{ids[i]};
      const Tensor want = all_gpu.forward(gpu_session, one, engine::Model::Logits::Last);
      const Tensor got = split.forward(split_session, one, engine::Model::Logits::Last);
      EXPECT_LE(compare(got, want).err, 1e-3) << name << " step " << i << " (pass " << pass << ")";
    }
  }
  const auto counted = split.device_weights().expert_cache()->counters();
  std::cout << fmt::format("[ cache in graphs ] {}: {} of {} steps replayed, {} hits, {} misses, {} fills, {} "
                           "evictions\n",
                           name, replayed(split), split.step_times().size(), counted.hit_routings,
                           counted.miss_routings, counted.fills, counted.evictions);
  EXPECT_GT(replayed(split), std::ssize(ids)) << name << ": too few split steps replayed graphs";
  EXPECT_GT(counted.hit_routings, 0u) << name << ": no routing ran on a GPU copy: the cache was not exercised";
  EXPECT_GT(counted.evictions, 0u) << name << ": nothing was evicted: the churn was not exercised";
}

TEST(CudaHybridCache, GraphReplaysFollowTheCachesChanges) {
  REQUIRE_GPU();
  const auto dirs = fixture_dirs();
  ASSERT_FALSE(dirs.empty());
  const Fixture f = load_fixture(dirs.front());
  churn_cache_in_graphs(*load(dirs.front()), f.ids, f.name());
}

// EXL3 routed experts (kept packed on the GPU) take cache slots too: a slot holds the expert's
// Exl3DeviceMatrix structs pointing into its own copy of the packed buffers (a slot whose pointers
// pointed anywhere else, or a stale copy, moves the logits far more). The synthetic tiny model with
// hidden and expert widths of 128 (EXL3's block) and every routed expert EXL3 3-bit.
TEST(CudaHybridCache, Exl3ExpertsTakeSlots) {
  REQUIRE_GPU();
  model::ModelConfig c = model::synthetic_config("tiny");
  c.hidden_size = 128;
  c.moe_intermediate_size = 128;
  model::ModelWeights w = model::random_weights(c, 3);
  uint64_t seed = 1;
  for (model::LayerWeights& layer : w.layers)
    for (model::ExpertWeights& x : layer.moe.experts)
      for (LinearWeight* m : {&x.gate, &x.up, &x.down}) {
        const int64_t rows = m->rows(), cols = m->cols();
        *m = LinearWeight();
        m->quantized = model::random_exl3(rows, cols, 3, Exl3Codebook::ThreeInst, model::exl3_seeds(seed++));
      }
  const engine::Model model(c, std::move(w));
  std::vector<const model::ExpertWeights*> routed;
  for (const model::ExpertWeights& x : model.weights().layers[0].moe.experts) routed.push_back(&x);
  ASSERT_EQ(cuda::expert_types(routed, model.weights().layers[0].moe.shared, cuda::WeightType::F32).routed,
            cuda::WeightType::Exl3);
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 37 + 11) % c.vocab_size);
  churn_cache_in_graphs(model, ids, "synthetic tiny, 128 wide, EXL3 3-bit experts");
}

// Split decode and verify steps replay captured graphs by default. Issued eagerly instead, every
// logit must be the same, bit for bit: the same kernels and the same host computation (test_cuda_
// forward.cpp's CudaGraphs test for the rest of the step). The prompt is fed twice (two sessions
// of one model), a span of 8 positions makes the calls cross graph bounds and capture new graphs
// often, and every call's split layers must reach the host: a replay that reused the previous
// replay's sequence numbers would pass its waits without the host's sums (wrong logits) or, with
// the host counting, leave layers unserved.
TEST(CudaHybridGraphs, ReplayedSplitStepsEqualEagerSplitStepsBitForBit) {
  REQUIRE_GPU();
  for (const auto& dir : fixture_dirs()) {
    const Fixture f = load_fixture(dir);
    const auto model = load(dir);
    const model::ModelConfig& c = model->config();
    for (const char* mode : {"incremental", "chunked:3"}) {
      cuda::CudaModel eager(*model, cuda::WeightType::F32, 0, {.enabled = false});
      cuda::CudaModel graphs(*model, cuda::WeightType::F32, 0, {.enabled = true, .span = 8});
      for (cuda::CudaModel* m : {&eager, &graphs})
        m->device_weights().set_cpu_experts(
            std::make_unique<cuda::CpuExperts>(c, model->weights(), third_on_cpu(c), 2));
      const int layers = split_layers(third_on_cpu(c));
      const auto feed = engine::parse_feed_mode(mode);
      for (int pass = 0; pass < 2; ++pass) {
        cuda::CudaRunner eager_run(eager), graph_run(graphs);
        const Tensor want = engine::sequence_logits(eager_run, f.vocab, f.ids, feed);
        const Tensor got = engine::sequence_logits(graph_run, f.vocab, f.ids, feed);
        ASSERT_EQ(got.shape, want.shape);
        EXPECT_EQ(0, std::memcmp(got.data.data(), want.data.data(), want.data.size() * sizeof(float)))
            << f.name() << " " << mode << " pass " << pass << ": graph-replayed split logits differ from eager ones";
      }
      const cuda::CpuExperts::Times times = graphs.device_weights().cpu_experts()->take_times();
      EXPECT_GT(replayed(graphs), std::ssize(f.ids) / 4) << f.name() << " " << mode << ": too few calls ran as graphs";
      EXPECT_EQ(replayed(eager), 0);
      EXPECT_EQ(times.layers, std::ssize(graphs.step_times()) * layers)
          << f.name() << " " << mode << ": hand-overs served, against the calls' split layers";
      std::cout << fmt::format("[ split graphs ] {} {}: {} of {} calls replayed, {} layers handed over, bit-identical "
                               "to eager\n",
                               f.name(), mode, replayed(graphs), graphs.step_times().size(), times.layers);
    }
  }
}

// A split model and its session destroyed after graph replays return: the model's destructor waits
// for its stream while the worker still serves, then the worker stops. (A step's calls return after
// its stream is done; the next test destroys the host side while the GPU still waits on it.)
TEST(CudaHybridGraphs, DestroyingASplitModelAfterGraphStepsReturns) {
  REQUIRE_GPU();
  const auto dirs = fixture_dirs();
  ASSERT_FALSE(dirs.empty());
  const Fixture f = load_fixture(dirs.front());
  const auto model = load(dirs.front());
  const model::ModelConfig& c = model->config();
  returns_within(std::chrono::seconds(120), "a split model's destruction", [&] {
    auto split = std::make_unique<cuda::CudaModel>(*model, cuda::WeightType::F32);
    split->device_weights().set_cpu_experts(
        std::make_unique<cuda::CpuExperts>(c, model->weights(), third_on_cpu(c), 2));
    auto session = std::make_unique<cuda::DeviceSession>(split->new_session());
    for (size_t i = 0; i < std::min<size_t>(f.ids.size(), 6); ++i)
      split->forward(*session, std::span<const int32_t>(&f.ids[i], 1), engine::Model::Logits::Last);
    EXPECT_GT(replayed(*split), 0);
    session.reset();  // its device arrays are freed on the model's stream
    split.reset();
  });
}

// A GPU wait the worker is never told about (a graph launched without CpuExperts::expect) holds the
// stream; destroying the CPU experts releases it, and the stream finishes.
TEST(CudaHybridGraphs, DestroyingTheCpuExpertsReleasesAWaitingGpu) {
  REQUIRE_GPU();
  const auto dirs = fixture_dirs();
  ASSERT_FALSE(dirs.empty());
  const auto model = load(dirs.front());
  const model::ModelConfig& c = model->config();
  const experts::ExpertHomes homes = third_on_cpu(c);
  int layer = 0;
  while (homes.cpu_count(layer) == 0) ++layer;
  const cudaStream_t stream = cuda::make_stream();
  {  // everything on the stream is freed before it goes
    const int k = c.experts_per_token, D = c.hidden_size;
    cuda::DeviceArray<float> x({1, D}, stream), out({1, D}, stream), weights({1, k}, stream);
    cuda::DeviceArray<int32_t> experts({1, k}, stream);
    for (cuda::DeviceArray<float>* a : {&x, &out, &weights}) a->fill_bytes(0);
    experts.fill_bytes(0);
    auto cpu = std::make_unique<cuda::CpuExperts>(c, model->weights(), homes, 2);
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    cpu->hand_over(layer, x.data(), 1, experts.data(), weights.data(), k, stream);
    cpu->add_sum(out.data(), 1, stream);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    EXPECT_EQ(cpu->captured(), 1);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    cudaGraphDestroy(graph);
    auto synchronized = [&] { EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess); };

    // Told: the worker serves the replay.
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    cpu->expect(1);
    returns_within(std::chrono::seconds(60), "a served replay", synchronized);
    EXPECT_EQ(cpu->take_times().layers, 1);

    // Not told: the GPU waits until the CPU experts go.
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady) << "the GPU did not wait for the host";
    returns_within(std::chrono::seconds(60), "the CPU experts' destruction", [&] { cpu.reset(); });
    returns_within(std::chrono::seconds(60), "the released stream", synchronized);
    cudaGraphExecDestroy(exec);
  }
  cudaStreamDestroy(stream);
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
