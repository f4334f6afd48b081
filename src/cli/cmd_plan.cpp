// `frank plan`: expert plans (which routed experts live in CPU RAM) and the routing traces they are
// learned from: generate-trace, build, simulate, diff, default. docs/expert-plans.md.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands.h"
#include "frank/core/error.h"
#include "frank/experts/baseline_plans.h"
#include "frank/experts/expert_cache.h"
#include "frank/experts/model_fingerprint.h"
#include "frank/experts/plan_builder.h"
#include "frank/experts/plan_diff.h"
#include "frank/experts/simulator.h"
#include "frank/experts/trace_generator.h"

namespace frank::cli {
namespace {

using namespace frank::experts;

// The cache and cost options shared by build and simulate.
struct ReplayOptions {
  size_t cache_slots = experts::kDefaultCacheSlots;
  CachePolicy cache;
  double cpu_expert_us = ExpertCosts().cpu_seconds() * 1e6;
  double gpu_expert_us = ExpertCosts().gpu_seconds() * 1e6;

  void add_options(CLI::App& cmd) {
    cmd.add_option("--cache-slots", cache_slots, "GPU cache slots for copies of CPU-homed experts")
        ->capture_default_str();
    cmd.add_option("--cache-half-life", cache.half_life_steps, "half-life of the cache's step counts, in steps")
        ->capture_default_str();
    cmd.add_option("--cache-fills-per-step", cache.max_fills_per_step, "copies the cache may start per step")
        ->capture_default_str();
    cmd.add_option("--cpu-expert-us", cpu_expert_us,
                   "measured microseconds to run one routed expert on the CPU in a step (default: V4-Flash FP4 "
                   "expert bytes / 100 GB/s)")
        ->capture_default_str();
    cmd.add_option("--gpu-expert-us", gpu_expert_us,
                   "measured microseconds to run one routed expert on the GPU in a step (default: bytes / 4 TB/s)")
        ->capture_default_str();
  }
  ExpertCosts costs() const { return ExpertCosts(cpu_expert_us * 1e-6, gpu_expert_us * 1e-6); }
  std::string describe() const {
    return fmt::format(
        "cache {} slots (half-life {} steps, {} fills per step); costs per expert and step: CPU {:.1f} us, "
        "GPU {:.2f} us",
        cache_slots, cache.half_life_steps, cache.max_fills_per_step, cpu_expert_us, gpu_expert_us);
  }
};

// ---- generate-trace ----

struct GenerateTraceOptions {
  GeneratorParams params;
  size_t steps = 0;
  std::string out;
};

void generate_trace_file(const GenerateTraceOptions& o) {
  TraceGenerator generator(o.params);
  TraceWriter writer(o.out, generator.header());
  size_t by_kind[kStepKindCount] = {};
  uint64_t tokens = 0;
  for (size_t i = 0; i < o.steps; ++i) {
    const RoutingStep step = generator.next_step();
    writer.write(step);
    ++by_kind[static_cast<size_t>(step.kind)];
    tokens += step.layers.front().size() / o.params.top_k;
  }
  writer.close();
  std::cout << fmt::format(
      "wrote {}: {} steps ({} decode, {} verify, {} prefill), {} tokens, model {}, workload '{}', seed {}\n", o.out,
      o.steps, by_kind[0], by_kind[1], by_kind[2], tokens, generator.header().model_fingerprint, o.params.workload,
      o.params.seed);
}

void register_generate_trace(CLI::App& plan) {
  auto o = std::make_shared<GenerateTraceOptions>();
  GeneratorParams& p = o->params;
  auto* cmd = plan.add_subcommand("generate-trace", "write a synthetic routing trace (docs/trace-generator.md)");
  cmd->add_option("--workload", p.workload, "workload name: picks the hot sets and phases")->capture_default_str();
  cmd->add_option("--seed", p.seed, "seed of the token stream (another seed: a held-out sample of the workload)")
      ->capture_default_str();
  cmd->add_option("--steps", o->steps, "forward steps to write")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--layers", p.n_layers, "MoE layers")->capture_default_str();
  cmd->add_option("--experts", p.n_experts, "routed experts per layer")->capture_default_str();
  cmd->add_option("--top-k", p.top_k, "experts per token")->capture_default_str();
  cmd->add_option("--model-type", p.model_type, "model family in the fingerprint")->capture_default_str();
  cmd->add_option("--hot-fraction", p.hot_fraction, "the hottest fraction of experts ...")->capture_default_str();
  cmd->add_option("--hot-share", p.hot_share, "... receives this share of routings")->capture_default_str();
  cmd->add_option("--depth-gradient", p.depth_gradient, "first layer's hot set / last layer's")->capture_default_str();
  cmd->add_option("--head-offset", p.head_offset, "Zipf-Mandelbrot offset, in hot-set sizes")->capture_default_str();
  cmd->add_option("--overlap", p.overlap, "fraction of each hot set that all workloads share")->capture_default_str();
  cmd->add_option("--phases", p.phases, "phases (sub-tasks) of the workload")->capture_default_str();
  cmd->add_option("--phase-shift", p.phase_shift, "fraction of ranks each phase permutes")->capture_default_str();
  cmd->add_option("--phase-mean-tokens", p.phase_mean_tokens, "mean phase length in tokens")->capture_default_str();
  cmd->add_option("--prefill-shift", p.prefill_shift, "fraction of ranks prefill tokens permute")
      ->capture_default_str();
  cmd->add_option("--persistence", p.persistence, "chance a pick repeats one of the previous token's experts")
      ->capture_default_str();
  cmd->add_option("--prefill-mean-tokens", p.prefill_mean_tokens, "mean new prompt tokens per turn")
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", p.prefill_chunk_tokens, "tokens per prefill step")->capture_default_str();
  cmd->add_option("--decode-mean-tokens", p.decode_mean_tokens, "mean generated tokens per turn")
      ->capture_default_str();
  cmd->add_option("--draft-tokens", p.draft_tokens, "draft tokens checked by a verify step")->capture_default_str();
  cmd->add_option("--verify-fraction", p.verify_fraction, "fraction of reply steps that are verify steps")
      ->capture_default_str();
  cmd->add_option("--out", o->out, "trace file to write")->required();
  cmd->callback([o] { generate_trace_file(*o); });
}

// ---- build ----

struct BuildCommand {
  std::vector<std::string> traces;
  size_t cpu_experts = 0;
  std::string method = "search";
  ReplayOptions replay;
  std::string out;
};

void build(const BuildCommand& o) {
  const auto traces = read_traces(o.traces);
  ExpertPlan plan;
  if (o.method == "frequency") {
    plan = frequency_plan(traces, o.cpu_experts);
  } else if (o.method == "search") {
    experts::BuildOptions options;
    options.cache = o.replay.cache;
    const PlanBuild built = build_plan(traces, o.cpu_experts, o.replay.cache_slots, o.replay.costs(), options);
    for (size_t i = 0; i < built.log.size(); ++i) {
      const auto& entry = built.log[i];
      std::cout << fmt::format(
          "{:<18} {:>5} swaps  validation: {:9.1f} us per generation step, {:5.1f}% zero-miss  {}\n", entry.candidate,
          entry.swaps, entry.score.seconds_per_step * 1e6, entry.score.zero_miss_fraction * 100,
          i == 0       ? "start"
          : entry.kept ? "kept"
                       : "rejected");
    }
    std::cout << fmt::format("search stopped: {}\n", built.stop_reason);
    plan = built.plan;
  } else {
    throw Error(fmt::format("--method '{}': expected search or frequency", o.method));
  }
  save_plan(o.out, plan);
  std::cout << fmt::format("wrote {}: {} CPU experts, {}\n", o.out, plan.cpu_expert_count(), plan.description);
}

void register_build(CLI::App& plan) {
  auto o = std::make_shared<BuildCommand>();
  auto* cmd = plan.add_subcommand("build", "build a plan with exactly N CPU experts from routing traces");
  cmd->add_option("--traces", o->traces, "routing trace files")->required();
  cmd->add_option("--cpu-experts", o->cpu_experts, "routed experts in CPU RAM, all layers together")->required();
  cmd->add_option("--method", o->method,
                  "search (frequency ranking improved by a validated local search) | frequency (plain ranking)")
      ->capture_default_str();
  o->replay.add_options(*cmd);
  cmd->add_option("--out", o->out, "plan file to write")->required();
  cmd->callback([o] { build(*o); });
}

// ---- simulate ----

struct SimulateOptions {
  std::string plan;
  std::vector<std::string> traces;
  ReplayOptions replay;
};

void print_group(const char* name, const StepGroupReport& g) {
  std::cout << fmt::format("{} steps: {} ({} tokens)\n", name, g.steps, g.tokens);
  if (g.steps == 0) return;
  auto line = [](const char* what, const Summary& s, double scale, const char* unit) {
    return fmt::format("  {:<22} mean {:.2f}{}  p50 {:.1f}{}  p90 {:.1f}{}  p99 {:.1f}{}\n", what, s.mean * scale, unit,
                       s.p50 * scale, unit, s.p90 * scale, unit, s.p99 * scale, unit);
  };
  std::cout << line("CPU routings per step", g.cpu_routings, 1, "");
  std::cout << line("CPU experts per step", g.cpu_experts, 1, "");
  std::cout << fmt::format("  {:<22} {} ({:.1f}%)\n", "zero-miss steps", g.zero_miss_steps, g.zero_miss_fraction * 100);
  std::cout << line("expert time per step", g.step_seconds, 1e6, " us");
}

void simulate_plan(const SimulateOptions& o) {
  const auto traces = read_traces(o.traces);
  const ExpertPlan plan = load_plan(o.plan, traces.front().header.model_fingerprint);
  const SimulationReport r = simulate(plan, traces, o.replay.cache_slots, o.replay.costs(), o.replay.cache);
  std::cout << fmt::format("plan {}: {} CPU experts of {} ({})\n", o.plan, plan.cpu_expert_count(),
                           size_t{plan.n_layers} * plan.n_experts, plan.model_fingerprint);
  std::cout << o.replay.describe() << "\n";
  print_group("generation (decode + verify)", r.generation);
  print_group("prefill", r.prefill);
  print_group("all", r.all);
  std::cout << fmt::format(
      "cache: hit rate {:.1f}% ({} of {} routings to CPU-homed experts), {} copies started ({:.2f} per step)\n",
      r.cache_hit_rate * 100, r.cache_hit_routings, r.cpu_homed_routings, r.cache_fills,
      r.all.steps ? static_cast<double>(r.cache_fills) / r.all.steps : 0.0);
}

void register_simulate(CLI::App& plan) {
  auto o = std::make_shared<SimulateOptions>();
  auto* cmd = plan.add_subcommand("simulate", "replay routing traces against a plan and a GPU cache");
  cmd->add_option("--plan", o->plan, "plan file")->required();
  cmd->add_option("--traces", o->traces, "routing trace files, replayed in order")->required();
  o->replay.add_options(*cmd);
  cmd->callback([o] { simulate_plan(*o); });
}

// ---- diff ----

std::string join(const std::vector<uint16_t>& ids) { return fmt::format("{}", fmt::join(ids, ",")); }

void register_diff(CLI::App& plan) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto* cmd = plan.add_subcommand("diff", "show which experts move between plan A and plan B");
  cmd->add_option("plans", *files, "plan A and plan B")->required()->expected(2);
  cmd->callback([files] {
    const ExpertPlan a = load_plan(files->at(0), "");
    const ExpertPlan b = load_plan(files->at(1), a.model_fingerprint);
    const PlanDiff d = diff_plans(a, b);
    for (const auto& m : d.layers)
      std::cout << fmt::format("layer {}: to CPU [{}]  to GPU [{}]\n", m.layer, join(m.to_cpu), join(m.to_gpu));
    std::cout << fmt::format("{} experts move to the CPU and {} to the GPU, in {} of {} layers\n", d.to_cpu, d.to_gpu,
                             d.layers.size(), a.n_layers);
  });
}

// ---- default ----

struct DefaultOptions {
  size_t cpu_experts = 0;
  uint32_t n_layers = kV4FlashLayers, n_experts = kV4FlashExperts, top_k = kV4FlashTopK;
  std::string model_type = "deepseek_v4";
  std::string out;
};

void register_default(CLI::App& plan) {
  auto o = std::make_shared<DefaultOptions>();
  auto* cmd = plan.add_subcommand("default", "write the default-ordering plan (highest expert ids to the CPU)");
  cmd->add_option("--cpu-experts", o->cpu_experts, "routed experts in CPU RAM, all layers together")->required();
  cmd->add_option("--layers", o->n_layers, "MoE layers")->capture_default_str();
  cmd->add_option("--experts", o->n_experts, "routed experts per layer")->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "experts per token (part of the fingerprint)")->capture_default_str();
  cmd->add_option("--model-type", o->model_type, "model family in the fingerprint")->capture_default_str();
  cmd->add_option("--out", o->out, "plan file to write")->required();
  cmd->callback([o] {
    const ExpertPlan plan = default_plan(model_fingerprint(o->model_type, o->n_layers, o->n_experts, o->top_k),
                                         o->n_layers, o->n_experts, o->cpu_experts);
    save_plan(o->out, plan);
    std::cout << fmt::format("wrote {}: {}\n", o->out, plan.description);
  });
}

}  // namespace

void register_plan(CLI::App& app) {
  auto* plan = app.add_subcommand("plan", "expert plans: which routed experts live in CPU RAM");
  plan->require_subcommand(1);
  register_generate_trace(*plan);
  register_build(*plan);
  register_simulate(*plan);
  register_diff(*plan);
  register_default(*plan);
}

}  // namespace frank::cli
