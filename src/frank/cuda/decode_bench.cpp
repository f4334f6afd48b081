#include "frank/cuda/decode_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "frank/core/error.h"
#include "frank/core/packed_bytes.h"
#include "frank/core/thread_pool.h"
#include "frank/cuda/bandwidth_probe.cuh"
#include "frank/cuda/bench_routing.h"
#include "frank/cuda/cuda_model.h"
#include "frank/cuda/native_weight.h"
#include "frank/cuda/op_profile.h"
#include "frank/cuda/weight_format.h"
#include "frank/engine/decoder_layer.h"
#include "frank/engine/logit_divergence.h"
#include "frank/model/shipped_formats.h"
#include "frank/model/synthetic.h"

namespace frank::cuda {
namespace {

struct Spread {
  double median, p10, p90;
};

Spread spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)]; };
  return {at(0.5), at(0.1), at(0.9)};
}

const char* kind_name(model::AttentionKind k) {
  switch (k) {
    case model::AttentionKind::Sliding: return "sliding";
    case model::AttentionKind::CompressedSparse: return "CSA";
    case model::AttentionKind::HeavilyCompressed: return "HCA";
  }
  return "?";
}

// What the step's MoE ops read: per layer the router, the distinct routed experts the tokens
// chose and the shared expert, in the routed experts' format.
struct MoeReads {
  std::string expert_format;
  double routed_experts = 0;  // distinct routed experts per step, all layers
  double bytes = 0;           // per step, all layers
  double routed_bytes = 0;    // the routed experts' share of `bytes`
};

// Every op of `steps` eagerly issued steps timed by events: total time per op per step. Issued
// eagerly, an op's events also enclose the host's gaps between its launches, so small ops read
// high and the sum exceeds the graph-replayed step; the graph's per-layer times are the truth.
// Then the MoE op's read rate against `bandwidth` (bytes/s), the routed experts' GEMVs in it.
template <class Step>
void report_per_op(CudaModel& gpu, StepPosition at, Step& step, int steps, double graph_step_us,
                   const MoeReads& moe, double bandwidth, std::ostream& out) {
  OpProfile profile;
  CudaOps timed(gpu.device_weights(), gpu.stream(), at);
  timed.set_profile(&profile);
  for (int i = 0; i < steps; ++i) step(timed, [](int) {});
  auto totals = profile.totals();
  std::sort(totals.begin(), totals.end(), [](const auto& a, const auto& b) { return a.us > b.us; });
  double sum = 0;
  for (const auto& t : totals) sum += t.us / steps;
  out << fmt::format("\n## per op ({} eager steps; op time summed over its calls in a step)\n\n", steps);
  out << "| op | calls per step | us per step | share of the ops |\n|---|---|---|---|\n";
  for (const auto& t : totals)
    out << fmt::format("| {} | {} | {:.1f} | {:.1f}% |\n", t.name, t.calls / steps, t.us / steps,
                       100.0 * t.us / steps / sum);
  out << fmt::format("\nops sum to {:.1f} us per step (eager: host launch gaps included); the graph-replayed step "
                     "takes {:.1f} us.\n",
                     sum, graph_step_us);
  const auto it = std::find_if(totals.begin(), totals.end(), [](const auto& t) { return t.name == "moe"; });
  if (it == totals.end()) return;
  const double us = it->us / steps, rate = moe.bytes / (us * 1e-6);
  out << fmt::format("\nrouted experts {}: the moe op (router, routing, {:.3g} distinct routed experts and the shared "
                     "expert over the layers) takes {:.1f} us per step for {:.1f} MB ({:.0f}% of it the routed "
                     "experts'): {:.0f} GB/s, {:.0f}% of the measured {:.0f} GB/s (eager: launch gaps included).\n",
                     moe.expert_format, moe.routed_experts, us, moe.bytes / 1e6, 100.0 * moe.routed_bytes / moe.bytes,
                     rate / 1e9, 100.0 * rate / bandwidth, bandwidth / 1e9);
}

}  // namespace

double measure_read_bandwidth(cudaStream_t stream) {
  const int64_t bytes = int64_t{4} << 30;
  DeviceArray<uint8_t> buffer({bytes}, stream);
  buffer.fill_bytes(0);
  DeviceArray<float> sink({read_probe_blocks()}, stream);
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<double> rates;
  for (int i = 0; i < 22; ++i) {
    check(cudaEventRecord(a, stream), "cudaEventRecord");
    check(read_probe(buffer.data(), bytes, sink.data(), stream), "read_probe");
    check(cudaEventRecord(b, stream), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    if (i >= 2) rates.push_back(static_cast<double>(bytes) / (ms * 1e-3));  // the first two warm up
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return spread(rates).median;
}

model::ModelWeights bench_weights(const model::ModelConfig& config, const DecodeBenchOptions& o) {
  model::ModelWeights w = model::skeleton_weights(config, o.seed);
  if (o.shipped_formats) {
    ThreadPool pool;
    model::fill_shipped_formats(config, w, o.seed, pool, o.exl3_bits);
  }
  return w;
}

double stored_linear_bytes(const LinearWeight& m, WeightType linear_type) {
  if (m.quantized && m.quantized->format == QuantizedMatrix::Format::Exl3)
    return static_cast<double>(packed_bytes(*m.quantized));
  return static_cast<double>(
      weight_bytes(m.quantized ? native_type(*m.quantized) : linear_type, m.rows(), m.cols()));
}

double stored_expert_bytes(const model::ExpertWeights& expert, WeightType linear_type) {
  return stored_linear_bytes(expert.gate, linear_type) + stored_linear_bytes(expert.up, linear_type) +
         stored_linear_bytes(expert.down, linear_type);
}

std::string weights_description(const DecodeBenchOptions& o) {
  if (!o.shipped_formats) return weight_type_name(o.weights);
  if (o.exl3_bits > 0)
    return fmt::format("FP8 as V4-Flash ships them, the routed experts EXL3 {}-bit (3INST), the rest bf16",
                       o.exl3_bits);
  return "FP8 / FP4 as V4-Flash ships them, the rest bf16";
}

std::string routed_expert_format(const DecodeBenchOptions& o) {
  if (!o.shipped_formats) return weight_type_name(o.weights);
  return o.exl3_bits > 0 ? fmt::format("EXL3 {}-bit", o.exl3_bits) : "FP4";
}

void run_decode_bench(const DecodeBenchOptions& o, std::ostream& out) {
  if (o.same_experts && !o.routing_from.empty())
    throw Error("--same-experts and --routing-from both choose the experts: use one");
  if (o.split()) return run_split_decode_bench(o, out);
  model::ModelConfig config = model::v4_flash_config(o.layers);
  if (o.same_experts) std::fill(config.hash_routed.begin(), config.hash_routed.end(), true);
  const engine::Model model(config, bench_weights(config, o));
  BenchRouting routing(o.routing_from, config, o.tokens_per_step);
  CudaModel gpu(model, o.weights, o.seed);
  const cudaStream_t stream = gpu.stream();
  const int L = config.num_layers, T = o.tokens_per_step;
  DeviceSession session = gpu.synthetic_session(o.ctx, T, o.seed + 1000, o.kv);
  session.position_at.copy_from_host(&session.position);
  const StepPosition at{session.position_at.data(), o.ctx + T};  // every step is replayed at position ctx

  // The step's tokens: distinct ids, or one id T times (then every layer routes them alike).
  std::vector<int32_t> ids;
  for (int t = 0; t < T; ++t) ids.push_back(o.same_experts ? 1000 : 1000 + 7919 * t);
  CudaOps plain(gpu.device_weights(), stream, at);
  CudaOps::Ids device_ids = routing.upload(plain, ids);
  // One step at position ctx on `s`; `at_layer(l)` runs before layer l and (l = L) before the head.
  // A step rewrites the same state (position ctx) every time, so it can be replayed.
  auto step_on = [&](DeviceSession& s, CudaOps& ops, auto&& at_layer) {
    ops.replay_routing(model.weights());  // the forced experts in device_ids, when replayed
    return engine::model_forward(ops, config, model.weights(), model.attention(), s.layers, o.ctx, device_ids, 0,
                                 static_cast<CudaOps::Array*>(nullptr), at_layer);
  };
  auto step = [&](CudaOps& ops, auto&& at_layer) { return step_on(session, ops, at_layer); };

  // Warm-up: the first step makes the weights in device memory.
  step(plain, [](int) {});
  check(cudaStreamSynchronize(stream), "warm-up");

  // The bytes each layer (and the embedding + head) must read: one more step whose counter moves
  // to the next layer's at each layer boundary.
  std::vector<Traffic> per_layer(static_cast<size_t>(L) + 1);
  {
    CudaOps counting(gpu.device_weights(), stream, at, &per_layer[static_cast<size_t>(L)]);  // the embedding first
    step(counting, [&](int l) { counting.set_traffic(&per_layer[static_cast<size_t>(l)]); });
  }
  // Routed experts: the distinct experts each layer's tokens chose, read once per step (with a
  // replayed trace: the mean over the timed steps, added after them).
  const model::MoeWeights& moe0 = model.weights().layers.front().moe;
  const double expert_bytes = stored_expert_bytes(moe0.experts.front(), o.weights),
               shared_bytes = stored_expert_bytes(moe0.shared, o.weights);
  std::vector<double> distinct(static_cast<size_t>(L));
  for (int l = 0; l < L && !routing.replayed(); ++l) {
    std::vector<int32_t> chosen(static_cast<size_t>(session.layers[l].last_experts.numel()));
    session.layers[l].last_experts.copy_to_host(chosen.data());
    check(cudaStreamSynchronize(stream), "download routing");
    distinct[l] = static_cast<double>(std::set<int32_t>(chosen.begin(), chosen.end()).size());
  }

  // Two CUDA graphs of one step: `marked` with an external event node before every layer, before
  // the head and after it (their timestamps give the per-layer times), and `served` without them,
  // as a served step is captured. The step time is served's: the event nodes cost time at replay
  // (8-9 us a step on an H200, bench/results/decode-h200-2026-12-01-s13), which a served step does
  // not pay; marked's own step time is reported beside it.
  std::vector<cudaEvent_t> events(static_cast<size_t>(L) + 2);
  for (auto& e : events) check(cudaEventCreate(&e), "cudaEventCreate");
  const auto capture = [&](bool marked) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    {
      CudaOps captured(gpu.device_weights(), stream, at, nullptr, /*keep_routing=*/false);
      if (!o.one_stream) captured.set_branches(gpu.branches());  // the warm-up step allocated the state
      CudaOps::Array logits = step(captured, [&](int l) {
        if (marked)
          check(cudaEventRecordWithFlags(events[static_cast<size_t>(l)], stream, cudaEventRecordExternal), "event");
      });
      if (marked)
        check(cudaEventRecordWithFlags(events[static_cast<size_t>(L) + 1], stream, cudaEventRecordExternal), "event");
    }
    check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority), "cudaGraphInstantiate");
    check(cudaGraphDestroy(graph), "cudaGraphDestroy");  // the executable graph is independent of it
    return exec;
  };
  const cudaGraphExec_t served = capture(false), marked = capture(true);

  cudaEvent_t begin, end;
  check(cudaEventCreate(&begin), "cudaEventCreate");
  check(cudaEventCreate(&end), "cudaEventCreate");
  // The time of one replay of `exec` in us.
  const auto replay = [&](cudaGraphExec_t exec) {
    check(cudaEventRecord(begin, stream), "event");
    check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    check(cudaEventRecord(end, stream), "event");
    check(cudaEventSynchronize(end), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
    return ms * 1e3;
  };
  std::vector<double> step_us, marked_step_us;
  std::vector<std::vector<double>> layer_us(static_cast<size_t>(L) + 1);
  for (int i = 0; i < o.steps + 3; ++i) {
    const std::vector<int> replayed = routing.next_step(device_ids);  // before `begin`: not timed
    const double served_us = replay(served), marked_us = replay(marked);  // the same step, both ways
    if (i < 3) continue;
    for (size_t l = 0; l < replayed.size(); ++l) distinct[l] += static_cast<double>(replayed[l]) / o.steps;
    step_us.push_back(served_us);
    marked_step_us.push_back(marked_us);
    for (int l = 0; l <= L; ++l) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, events[l], events[l + 1]), "cudaEventElapsedTime (graph event nodes)");
      layer_us[l].push_back(ms * 1e3);
    }
  }
  MoeReads moe{routed_expert_format(o)};
  for (int l = 0; l < L; ++l) {
    per_layer[l].weight_bytes += distinct[l] * expert_bytes + shared_bytes;
    moe.routed_experts += distinct[l];
    moe.routed_bytes += distinct[l] * expert_bytes;
    moe.bytes += distinct[l] * expert_bytes + shared_bytes +
                 stored_linear_bytes(model.weights().layers[static_cast<size_t>(l)].moe.router, o.weights);
  }
  const double bandwidth = measure_read_bandwidth(stream);

  cudaDeviceProp prop{};
  int device = 0;
  cudaGetDevice(&device);
  cudaGetDeviceProperties(&prop, device);
  out << fmt::format("# decode step, synthetic DeepSeek-V4-Flash, {} layers, ctx {}, {} token(s) per step{}\n\n",
                     L, o.ctx, T, o.same_experts ? " (all tokens route alike)" : "");
  out << fmt::format("K=V rows stored as {} ({} B per row)\n\n", engine::kv_format_name(o.kv),
                     session.layers.front().kv.row_bytes);
  out << routing.describe() << "\n\n";
  out << (o.one_stream ? "Independent chains issued in order on one stream (--one-stream).\n\n"
                       : "Independent chains (attention's; the shared expert beside the router): two branches of "
                         "the graph.\n\n");
  out << fmt::format("GPU: {}; weights {} ({:.1f} GB resident); read bandwidth measured now: {:.0f} GB/s "
                     "(4 GiB read, median of 20)\n\n",
                     prop.name, weights_description(o), gpu.weight_bytes() / 1e9,
                     bandwidth / 1e9);
  out << "| layer | kind | experts read | median us | p10-p90 us | weights MB | state MB | GB/s | of measured |\n";
  out << "|---|---|---|---|---|---|---|---|---|\n";
  double total_bytes = 0;
  for (int l = 0; l <= L; ++l) {
    const Spread s = spread(layer_us[l]);
    const Traffic& t = per_layer[l];
    const double bytes = t.weight_bytes + t.state_bytes;
    total_bytes += bytes;
    const double rate = bytes / (s.median * 1e-6);
    out << fmt::format("| {} | {} | {} | {:.1f} | {:.1f}-{:.1f} | {:.1f} | {:.2f} | {:.0f} | {:.0f}% |\n",
                       l < L ? std::to_string(l) : "head", l < L ? kind_name(config.attention[l]) : "embed+head",
                       l < L ? fmt::format("{:.3g}+1", distinct[l]) : "-", s.median, s.p10, s.p90,
                       t.weight_bytes / 1e6, t.state_bytes / 1e6, rate / 1e9, 100.0 * rate / bandwidth);
  }
  const Spread s = spread(step_us);
  const double rate = total_bytes / (s.median * 1e-6);
  out << fmt::format("| step | | | {:.1f} | {:.1f}-{:.1f} | {:.1f} total | | {:.0f} | {:.0f}% |\n\n", s.median,
                     s.p10, s.p90, total_bytes / 1e6, rate / 1e9, 100.0 * rate / bandwidth);
  const Spread m = spread(marked_step_us);
  out << fmt::format("{} graph replays after 3 warm-up replays; bytes = weights and session state the step must "
                     "read (activations not counted). The step row times the step's graph as served; the layer "
                     "rows come from a copy of it with an event node at each layer boundary, which took {:.1f} us "
                     "({:.1f}-{:.1f}) a step.\n",
                     o.steps, m.median, m.p10, m.p90);
  if (o.per_op) report_per_op(gpu, at, step, o.steps, s.median, moe, bandwidth, out);
  if (o.kv != KvFormat::F32) {
    // The same random session with its rows unrounded: one eager step on each, logits compared
    // (both at position ctx, which `at` holds).
    DeviceSession reference = gpu.synthetic_session(o.ctx, T, o.seed + 1000, KvFormat::F32);
    const Tensor want = plain.download(step_on(reference, plain, [](int) {}));
    const Tensor got = plain.download(step_on(session, plain, [](int) {}));
    const engine::LogitDivergence d = engine::logit_divergence(want, got);
    out << fmt::format("\nKL(p with fp32 rows || p with {} rows) over the step's {} token(s): mean {:.3g}, max {:.3g} "
                       "nats; greedy tokens agree at {} of {} (random weights: not a trained model's KL).\n",
                       engine::kv_format_name(o.kv), d.positions, d.mean_kl, d.max_kl, d.greedy_agree, d.positions);
  }
  for (auto& e : events) cudaEventDestroy(e);
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  cudaGraphExecDestroy(served);
  cudaGraphExecDestroy(marked);
}

}  // namespace frank::cuda
