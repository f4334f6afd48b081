// `frank bench decode`: the GPU decode-step benchmark (frank/cuda/decode_bench.h). Needs a build
// with -DFRANK_CUDA=ON and a GPU.
#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <string>

#include "commands.h"
#include "frank/core/error.h"
#include "frank/engine/kv_record.h"
#include "frank/experts/expert_cache.h"
#ifdef FRANK_WITH_CUDA
#include "frank/cuda/decode_bench.h"
#include "frank/cuda/device_weights.h"
#endif

namespace frank::cli {
namespace {

struct DecodeOptions {
  std::string synthetic = "v4-flash";
  int layers = 4;
  int64_t ctx = 32768;
  int tokens_per_step = 1;
  int steps = 100;
  std::string weights_dtype = "bf16";
  std::string format = "bf16";
  std::string kv_dtype = "fp32";
  bool same_experts = false;
  bool one_stream = false;
  bool per_op = false;
  std::string plan;
  std::optional<double> gpu_memory_budget_gb;
  unsigned cpu_expert_threads = 0;
  size_t expert_cache_slots = experts::kDefaultCacheSlots;
  bool split_graphs = false;
  std::string routing_from;
};

void run_decode(const DecodeOptions& o) {
  if (o.synthetic != "v4-flash") throw Error("--synthetic: only v4-flash is available");
  const engine::KvFormat kv = engine::parse_kv_format(o.kv_dtype);
#ifdef FRANK_WITH_CUDA
  cuda::DecodeBenchOptions b;
  b.layers = o.layers;
  b.ctx = o.ctx;
  b.tokens_per_step = o.tokens_per_step;
  b.steps = o.steps;
  b.weights = cuda::parse_weight_type(o.weights_dtype);
  b.exl3_bits = o.format == "exl3-k2" ? 2 : o.format == "exl3-k3" ? 3 : o.format == "exl3-k4" ? 4 : 0;
  if (o.format != "bf16" && o.format != "fp8-fp4" && b.exl3_bits == 0)
    throw Error(fmt::format("--format {}: expected bf16, fp8-fp4, exl3-k2, exl3-k3 or exl3-k4", o.format));
  b.shipped_formats = o.format != "bf16";
  if (b.shipped_formats && b.weights != cuda::WeightType::BF16)
    throw Error(fmt::format("--format {} keeps the weights V4-Flash ships in BF16 as bf16: drop --weights-dtype",
                            o.format));
  b.kv = kv;
  b.same_experts = o.same_experts;
  b.one_stream = o.one_stream;
  b.per_op = o.per_op;
  b.plan = o.plan;
  b.gpu_memory_budget_gb = o.gpu_memory_budget_gb;
  b.cpu_expert_threads = o.cpu_expert_threads;
  b.expert_cache_slots = o.expert_cache_slots;
  b.split_graphs = o.split_graphs;
  b.routing_from = o.routing_from;
  cuda::run_decode_bench(b, std::cout);
#else
  (void)kv;
  throw Error("bench decode needs the CUDA backend: build with -DFRANK_CUDA=ON");
#endif
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "benchmarks (GPU)");
  bench->require_subcommand(1);
  auto o = std::make_shared<DecodeOptions>();
  auto* decode = bench->add_subcommand(
      "decode", "time the decode / verify step at the real V4-Flash dimensions on random device weights");
  decode->add_option("--synthetic", o->synthetic, "model shape: v4-flash")->capture_default_str();
  decode->add_option("--layers", o->layers, "the first N layers (2 sliding, then CSA/HCA alternating)")
      ->capture_default_str()
      ->check(CLI::Range(1, 43));
  decode->add_option("--ctx", o->ctx, "tokens already in the session (random state)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1048000}));
  decode->add_option("--tokens-per-step", o->tokens_per_step, "1 = decode; k+1 = verify k drafts")
      ->capture_default_str()
      ->check(CLI::Range(1, 8));
  decode->add_option("--steps", o->steps, "timed graph replays")->capture_default_str()->check(CLI::Range(5, 100000));
  decode->add_option("--weights-dtype", o->weights_dtype, "bf16 or fp32")->capture_default_str();
  decode->add_option("--format", o->format,
                     "bf16: every Linear in --weights-dtype; fp8-fp4: as V4-Flash ships them (FP8 128x128 blocks, "
                     "routed experts FP4, the rest bf16), random codes kept as shipped on the GPU; exl3-k2, exl3-k3, "
                     "exl3-k4: as fp8-fp4 but the routed experts EXL3 at 2, 3 or 4 bits (3INST), random trellises "
                     "kept packed on the GPU")
      ->capture_default_str();
  decode->add_option("--kv-dtype", o->kv_dtype,
                     "K=V rows of the session: fp32, bf16 or fp8 (584-B record); not fp32: also the KL of one step "
                     "against fp32 rows")
      ->capture_default_str();
  decode->add_flag("--same-experts", o->same_experts,
                   "every token of the step routes to the same experts (hash routing, one token id)");
  decode->add_flag("--one-stream", o->one_stream,
                   "issue the step's independent chains (attention: queries beside the K=V row or the indexer; MoE: "
                   "the shared expert beside the router) in order on one stream instead of as two branches of the "
                   "graph: what the branches save");
  decode->add_flag("--per-op", o->per_op,
                   "also time every op of eagerly issued steps (where the time goes), and the moe op's read rate "
                   "against the measured bandwidth");
  decode->add_option("--plan", o->plan,
                     "expert plan: its CPU-homed routed experts (FP4, or EXL3 with --format exl3-kN; random) run on "
                     "the CPU; the step is issued eagerly (or replayed with --split-graphs) and timed against the "
                     "bound from the GPU's and the host's bandwidths");
  decode->add_option("--gpu-memory-budget", o->gpu_memory_budget_gb,
                     "GB of GPU memory for the weights: the routed experts that do not fit run on the CPU (default "
                     "ordering unless --plan)")
      ->check(CLI::PositiveNumber);
  decode->add_option("--cpu-expert-threads", o->cpu_expert_threads,
                     "threads computing the CPU's experts, pinned to cores 0..N-1 (0: all)")
      ->capture_default_str();
  decode->add_option("--expert-cache-slots", o->expert_cache_slots,
                     "GPU slots, one routed expert each, holding copies of the CPU-homed experts used most; they "
                     "come out of --gpu-memory-budget")
      ->capture_default_str();
  decode->add_flag("--split-graphs", o->split_graphs,
                   "with --plan / --gpu-memory-budget: replay the split step as a captured CUDA graph");
  decode->add_option("--routing-from", o->routing_from,
                     "a routing trace (frank plan generate-trace, --record-routing) whose experts every step routes "
                     "to, in order, cycled; the trace's layers, experts and top-k must match the model")
      ->check(CLI::ExistingFile);
  decode->callback([o] { run_decode(*o); });
}

}  // namespace frank::cli
