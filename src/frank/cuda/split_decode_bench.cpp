// `frank bench decode --gpu-memory-budget GB | --plan FILE` (decode_bench.h): the decode step with
// routed experts split between GPU and CPU (issue 7), measured against the bound from both
// bandwidths:
//   bound = (the step's other bytes) / GPU bandwidth
//         + sum over layers of max(CPU experts' bytes / host bandwidth, GPU experts' bytes / GPU bandwidth)
// (the CPU and the GPU run a layer's experts concurrently; layers run one after another; attention,
// norms and routers stay on the GPU). The CPU-homed experts are FP4 as DeepSeek ships them (random
// bytes, scales near the trained weights' 2^-7), or EXL3 with --format exl3-kN (random trellis and
// sign vectors, model/synthetic_exl3.h); the GPU's as the rest of the bench stores them.
#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "frank/core/splitmix64.h"
#include "frank/core/thread_pool.h"
#include "frank/cuda/bench_routing.h"
#include "frank/cuda/cuda_model.h"
#include "frank/cuda/decode_bench.h"
#include "frank/engine/decoder_layer.h"
#include "frank/experts/expert_homes.h"
#include "frank/model/shipped_formats.h"
#include "frank/model/synthetic.h"
#include "frank/model/synthetic_exl3.h"
#include "memory_bandwidth.h"

namespace frank::cuda {
namespace {

// Random FP4 weights [rows, cols] with one scale per 32 values.
LinearWeight random_fp4(int64_t rows, int64_t cols, uint64_t seed) {
  QuantizedMatrix q;
  q.format = QuantizedMatrix::Format::Fp4;
  q.rows = rows, q.cols = cols;
  q.values.resize(static_cast<size_t>(rows * cols / 2));
  q.scales.assign(static_cast<size_t>(rows * cols / 32), 120);  // 2^-7: e2m1 values of ~1 become ~1/sqrt(4096)
  uint64_t state = seed;
  for (size_t i = 0; i < q.values.size(); i += 8) {
    const uint64_t r = splitmix64_finalize(++state);
    for (size_t b = 0; b < 8 && i + b < q.values.size(); ++b) q.values[i + b] = static_cast<uint8_t>(r >> (8 * b));
  }
  LinearWeight w;
  w.quantized = std::move(q);
  return w;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

void run_split_decode_bench(const DecodeBenchOptions& o, std::ostream& out) {
  model::ModelConfig config = model::v4_flash_config(o.layers);
  if (o.same_experts) std::fill(config.hash_routed.begin(), config.hash_routed.end(), true);
  model::ModelWeights weights = bench_weights(config, o);
  const experts::GpuWeightBytes gpu_bytes =
      o.shipped_formats
          ? experts::gpu_weight_bytes(config, weights, 2,
                                      [&](const model::WeightSlot& s) {
                                        return model::shipped_bytes(model::v4_flash_format(s.name, o.exl3_bits),
                                                                    s.shape[0], s.shape[1], o.exl3_bits);
                                      })
          : experts::gpu_weight_bytes(config, weights, o.weights == WeightType::BF16 ? 2 : 4);
  experts::ExpertHomes homes =
      experts::choose_expert_homes(config, gpu_bytes, {o.plan, o.gpu_memory_budget_gb, o.expert_cache_slots});
  const int L = config.num_layers, T = o.tokens_per_step, E = config.n_routed_experts;
  const int64_t D = config.hidden_size, I = config.moe_intermediate_size;

  // The CPU-homed experts in host memory, made in parallel (FP4 already with --format fp8-fp4; the
  // EXL3 ones of --format exl3-kN are shape-only until now).
  ThreadPool pool(o.cpu_expert_threads, /*pin=*/true);
  const bool host_data = !o.shipped_formats || o.exl3_bits > 0;
  std::vector<std::pair<int, int>> cpu_experts;
  for (int l = 0; l < L; ++l)
    for (int e = 0; e < E; ++e)
      if (homes.on_cpu(l, e) && host_data) cpu_experts.emplace_back(l, e);
  const auto random_expert_matrix = [&](int64_t rows, int64_t cols, uint64_t seed) {
    if (o.exl3_bits == 0) return random_fp4(rows, cols, seed);
    LinearWeight w;
    w.quantized = model::random_exl3(rows, cols, o.exl3_bits, Exl3Codebook::ThreeInst, model::exl3_seeds(seed));
    return w;
  };
  pool.parallel_for(std::ssize(cpu_experts), [&](int64_t i) {
    const auto [l, e] = cpu_experts[static_cast<size_t>(i)];
    const uint64_t seed = o.seed * 1000003 + static_cast<uint64_t>(l * E + e) * 3;
    weights.layers[static_cast<size_t>(l)].moe.experts[static_cast<size_t>(e)] = {
        random_expert_matrix(I, D, seed << 32), random_expert_matrix(I, D, (seed + 1) << 32),
        random_expert_matrix(D, I, (seed + 2) << 32)};
  });
  // One CPU-homed expert's bytes: gate and up [I, D], down [D, I].
  const model::ShippedFormat cpu_format = o.exl3_bits > 0 ? model::ShippedFormat::Exl3 : model::ShippedFormat::Fp4;
  const double cpu_expert_bytes = 3.0 * model::shipped_bytes(cpu_format, I, D, o.exl3_bits);

  const engine::Model model(config, std::move(weights));
  BenchRouting routing(o.routing_from, config, T);
  // A graph keeps no routing (last_experts, read below per step); without a trace every step routes
  // as the eager steps before the capture did (the same ids at the same position).
  if (o.split_graphs && routing.replayed())
    throw Error("--split-graphs with --routing-from: a replayed graph keeps no routing to report");
  CudaModel gpu(model, o.weights, o.seed);
  gpu.device_weights().set_cpu_experts(
      std::make_unique<CpuExperts>(model.config(), model.weights(), homes, o.cpu_expert_threads));
  gpu.device_weights().set_expert_cache(o.expert_cache_slots, {});
  CpuExperts& cpu = *gpu.device_weights().cpu_experts();
  cpu.time_gpu_share(true);
  const cudaStream_t stream = gpu.stream();
  DeviceSession session = gpu.synthetic_session(o.ctx, T, o.seed + 1000, o.kv);
  session.position_at.copy_from_host(&session.position);
  const StepPosition at{session.position_at.data(), o.ctx + T};
  std::vector<int32_t> ids;
  for (int t = 0; t < T; ++t) ids.push_back(o.same_experts ? 1000 : 1000 + 7919 * t);
  CudaOps ops(gpu.device_weights(), stream, at);
  CudaOps::Ids device_ids = routing.upload(ops, ids);
  auto step = [&](CudaOps& with) {
    with.replay_routing(model.weights());  // the forced experts in device_ids, when replayed
    return engine::model_forward(with, config, model.weights(), model.attention(), session.layers, o.ctx, device_ids,
                                 0, static_cast<CudaOps::Array*>(nullptr));
  };
  step(ops);  // warm-up: uploads the GPU's weights
  gpu.device_weights().end_step();
  check(cudaStreamSynchronize(stream), "warm-up");
  cpu.take_times();
  Traffic other;  // every byte but the routed and shared experts'
  {
    CudaOps counting(gpu.device_weights(), stream, at, &other);
    step(counting);
    gpu.device_weights().end_step();
    check(cudaStreamSynchronize(stream), "counting step");
    cpu.take_times();
  }

  const double gpu_bw = measure_read_bandwidth(stream);
  const unsigned threads = pool.threads();
  std::vector<uint64_t> probe(size_t{4} << 27, 1);  // 4 GiB
  const double host_bw = bench::read_bandwidth(probe, pool, 10).median * 1e9;
  probe = {};

  // A GPU-homed routed expert as the GPU stores it (all of them alike), and the shared expert (FP8
  // with --format fp8-fp4).
  double gpu_expert_bytes = 0;
  for (int e = 0; e < E && gpu_expert_bytes == 0; ++e)
    if (!homes.on_cpu(0, e)) gpu_expert_bytes = stored_expert_bytes(model.weights().layers.front().moe.experts[e], o.weights);
  const double shared_bytes = stored_expert_bytes(model.weights().layers.front().moe.shared, o.weights);
  // The CPU experts' worker computes on core 0, where `pool` pinned this thread too: unpinned, this
  // thread issues the steps beside it, not in turns with it.
  cpu_set_t every_core;
  CPU_ZERO(&every_core);
  for (unsigned c = 0; c < std::thread::hardware_concurrency(); ++c) CPU_SET(c, &every_core);
  sched_setaffinity(0, sizeof every_core, &every_core);  // best effort, as the pool's pinning
  // --split-graphs: one step captured (after the eager ones above: every weight is on the GPU); each
  // launch tells the CPU experts' worker how many layers it hands over.
  cudaGraphExec_t graph = nullptr;
  int64_t hand_overs = 0;
  if (o.split_graphs) {
    const int64_t before = cpu.captured();
    gpu.device_weights().wait_for_expert_copies();  // outside the graph, as CudaModel does
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    {
      CudaOps captured(gpu.device_weights(), stream, at, nullptr, /*keep_routing=*/false);
      step(captured);
    }
    cudaGraph_t captured_graph = nullptr;
    check(cudaStreamEndCapture(stream, &captured_graph), "cudaStreamEndCapture");
    const cudaError_t made = cudaGraphInstantiate(&graph, captured_graph, 0);
    cudaGraphDestroy(captured_graph);
    check(made, "cudaGraphInstantiate");
    hand_overs = cpu.captured() - before;
  }
  cudaEvent_t begin, end;
  check(cudaEventCreate(&begin), "cudaEventCreate");
  check(cudaEventCreate(&end), "cudaEventCreate");
  std::vector<double> step_us, host_us, compute_us, wait_us, share_us, cpu_count, gpu_count, bound_us;
  for (int i = 0; i < o.steps + 3; ++i) {
    routing.next_step(device_ids);  // before the step's timing starts
    const auto host_start = std::chrono::steady_clock::now();
    check(cudaEventRecord(begin, stream), "event");
    if (graph != nullptr) {
      gpu.device_weights().wait_for_expert_copies();
      check(cudaGraphLaunch(graph, stream), "cudaGraphLaunch");
      cpu.expect(hand_overs);
    } else {
      step(ops);
    }
    check(cudaEventRecord(end, stream), "event");
    cpu.finish();  // asleep while the worker computes (a spinning wait would take a pool thread's core)
    check(cudaEventSynchronize(end), "cudaEventSynchronize");
    const double host = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host_start).count();
    const CpuExperts::Times times = cpu.take_times();
    // The GPU cache's policy and copies (expert_cache_slots.h) run between steps, not timed.
    if (i < 3) {
      gpu.device_weights().end_step();
      continue;
    }
    float ms = 0;
    check(cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
    step_us.push_back(ms * 1e3);
    host_us.push_back(host);
    compute_us.push_back(times.compute_seconds * 1e6);
    wait_us.push_back(times.wait_seconds * 1e6);
    share_us.push_back(times.gpu_share_seconds * 1e6);
    // The step's routing, layer by layer: distinct experts on each side, and the bound.
    double bound = (other.weight_bytes + other.state_bytes) / gpu_bw * 1e6;
    int cpu_total = 0, gpu_total = 0;
    for (int l = 0; l < L; ++l) {
      std::vector<int32_t> chosen(static_cast<size_t>(session.layers[l].last_experts.numel()));
      session.layers[l].last_experts.copy_to_host(chosen.data());
      check(cudaStreamSynchronize(stream), "download routing");
      int on_cpu = 0, on_gpu = 0;  // routed experts; the shared expert is added apart
      // The host ran the CPU-homed experts without a GPU copy (the cache as the step saw it).
      for (const int32_t e : std::set<int32_t>(chosen.begin(), chosen.end()))
        (e >= 0 && cpu.runs_on_cpu(l)[static_cast<size_t>(e)] ? on_cpu : on_gpu) += 1;
      cpu_total += on_cpu, gpu_total += on_gpu + 1;
      bound += std::max(on_cpu * cpu_expert_bytes / host_bw, (on_gpu * gpu_expert_bytes + shared_bytes) / gpu_bw) * 1e6;
    }
    cpu_count.push_back(cpu_total);
    gpu_count.push_back(gpu_total);
    bound_us.push_back(bound);
    gpu.device_weights().end_step();
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  if (graph != nullptr) cudaGraphExecDestroy(graph);

  cudaDeviceProp prop{};
  int device = 0;
  cudaGetDevice(&device);
  cudaGetDeviceProperties(&prop, device);
  const size_t total = static_cast<size_t>(L) * E, on_cpu = homes.cpu_count();
  out << fmt::format("# decode step with routed experts split between GPU and CPU, synthetic DeepSeek-V4-Flash, {} "
                     "layers, ctx {}, {} token(s) per step\n\n",
                     L, o.ctx, T);
  out << fmt::format("Placement: {} of {} routed experts on the CPU ({}); {:.2f} GB of weights on the GPU ({}); the "
                     "CPU's experts {} ({:.2f} MB each, {:.1f} GB in host memory).\n\n",
                     on_cpu, total,
                     o.plan.empty() ? fmt::format("default ordering for --gpu-memory-budget {} GB", *o.gpu_memory_budget_gb)
                                    : "plan " + o.plan,
                     gpu.weight_bytes() / 1e9, weights_description(o),
                     o.exl3_bits > 0 ? fmt::format("EXL3 {}-bit (3INST)", o.exl3_bits) : "FP4 as shipped",
                     cpu_expert_bytes / 1e6,
                     static_cast<double>(on_cpu) * cpu_expert_bytes / 1e9);
  out << fmt::format("GPU: {}, read bandwidth measured now {:.0f} GB/s (4 GiB, median of 20). Host: {} threads "
                     "pinned, read bandwidth measured now {:.1f} GB/s (4 GiB, {} threads, median of 10).\n\n",
                     prop.name, gpu_bw / 1e9, threads, host_bw / 1e9, threads);
  out << routing.describe() << "\n\n";
  if (const ExpertCacheSlots* cache = gpu.device_weights().expert_cache()) {
    const ExpertCacheSlots::Counters c = cache->counters();
    const uint64_t routings = c.hit_routings + c.miss_routings;
    const double hit_percent =
        routings ? 100.0 * static_cast<double>(c.hit_routings) / static_cast<double>(routings) : 0.0;
    out << fmt::format("GPU expert cache: {} slots ({:.2f} GB); over all {} steps (warm-up included): {} of {} routings "
                       "to CPU-homed experts hit a GPU copy ({:.1f}%), {} steps with no CPU miss, {} fills, {} "
                       "evictions.\n\n",
                       cache->slots(), static_cast<double>(cache->device_bytes()) / 1e9, c.steps, c.hit_routings,
                       routings, hit_percent, c.zero_miss_steps, c.fills, c.evictions);
  } else {
    out << "GPU expert cache: none (--expert-cache-slots 0).\n\n";
  }
  out << (graph != nullptr ? "The step is replayed as a captured CUDA graph (--split-graphs; the GPU's share of the "
                             "split layers is not timed in graphs).\n\n"
                           : "The step is issued eagerly (--split-graphs: replayed as a CUDA graph).\n\n");
  out << "The GPU hands each split layer to the host's worker through mapped memory and waits for its sum on the "
         "device (cpu_experts.h).\n\n";
  out << "| per step | median | p10-p90 |\n|---|---|---|\n";
  const auto row = [&](const char* name, const std::vector<double>& v, const char* unit) {
    out << fmt::format("| {} | {:.1f} {} | {:.1f}-{:.1f} |\n", name, median(v), unit, quantile(v, 0.1), quantile(v, 0.9),
                       unit);
  };
  row("step (GPU events)", step_us, "us");
  row("step (host wall clock)", host_us, "us");
  row("CPU experts: computing (host)", compute_us, "us");
  row("CPU experts: waiting for the routing (host)", wait_us, "us");
  row("GPU experts of the split layers (GPU events)", share_us, "us");
  row("distinct CPU experts", cpu_count, "");
  row("distinct GPU experts (shared included)", gpu_count, "");
  row("bound from both bandwidths", bound_us, "us");
  const double cpu_rate = median(cpu_count) * cpu_expert_bytes / (median(compute_us) * 1e-6);
  out << fmt::format("\nBound = the step's other bytes ({:.1f} MB) / GPU bandwidth + per layer max(CPU experts x "
                     "{:.2f} MB / host bandwidth, (GPU experts x {:.2f} MB + the shared expert's {:.2f} MB) / GPU "
                     "bandwidth). The step runs at {:.0f}% of "
                     "the bound's speed; the CPU's experts are read at {:.1f} GB/s while it computes ({:.0f}% of the "
                     "host's measured bandwidth). {} steps after 3 warm-up steps.\n",
                     (other.weight_bytes + other.state_bytes) / 1e6, cpu_expert_bytes / 1e6, gpu_expert_bytes / 1e6,
                     shared_bytes / 1e6, 100.0 * median(bound_us) / median(step_us), cpu_rate / 1e9, 100.0 * cpu_rate / host_bw, o.steps);
}

}  // namespace frank::cuda
