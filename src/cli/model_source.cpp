#include "model_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iostream>
#include <nlohmann/json.hpp>

#include "frank/core/error.h"
#include "frank/engine/kv_record.h"
#include "frank/experts/expert_homes.h"
#include "frank/model/config_common.h"
#include "frank/model/loader.h"
#include "frank/model/loader_v41.h"
#include "frank/model/synthetic.h"
#ifdef FRANK_WITH_CUDA
#include "frank/cuda/cuda_model.h"
#include "frank/cuda/device_sessions.h"
#endif

namespace frank::cli {

void ModelSource::add_options(CLI::App& app) {
  auto* model = app.add_option("--model", model_dir, "checkpoint directory (config.json + safetensors)");
  app.add_option("--synthetic", synthetic, "random-weight model built in memory: tiny (the default without --model)")
      ->excludes(model);
  app.add_option("--synthetic-seed", seed, "seed of the synthetic weights")->capture_default_str();
  app.add_option("--backend", backend, "compute backend: cpu (the fp32 reference) or cuda")->capture_default_str();
  app.add_option("--weights-dtype", weights_dtype,
                 "cuda: Linear weights in device memory as bf16 (fp32 accumulation) or fp32 (exactness checks)")
      ->capture_default_str();
  app.add_option("--cuda-graphs", cuda_graphs,
                 "cuda: replay decode and verify steps (up to 8 tokens) as captured CUDA graphs (false: issue every "
                 "kernel eagerly)")
      ->capture_default_str();
  app.add_option("--kv-dtype", kv_dtype,
                 "how the session stores attention K=V rows (window and compressed entries): fp32, bf16 or fp8 "
                 "(DeepSeek-V4's 584-byte record); other than fp32 needs --backend cuda")
      ->capture_default_str();
  app.add_option("--plan", plan,
                 "cuda: an expert plan (docs/expert-plans.md): its CPU-homed routed experts stay in host memory and "
                 "run on the CPU");
  app.add_option("--gpu-memory-budget", gpu_memory_budget_gb,
                 "cuda: GB of GPU memory for the weights; the routed experts that do not fit run on the CPU (chosen "
                 "by the default ordering unless --plan is given, which must then fit)")
      ->check(CLI::PositiveNumber);
  app.add_option("--cpu-expert-threads", cpu_expert_threads,
                 "cuda with CPU-homed experts: threads that compute them, pinned to cores 0..N-1 (0: all)")
      ->capture_default_str();
  app.add_option("--expert-cache-slots", expert_cache_slots,
                 "cuda with CPU-homed experts: GPU slots, one routed expert each, that hold copies of the CPU-homed "
                 "experts used most (docs/expert-plans.md); they come out of --gpu-memory-budget")
      ->capture_default_str();
  app.add_option("--dump-topk-rows", dump_topk_rows,
                 "write every indexer score row of the run to DIR/topk-rows.bin (CPU backend; for frank_topk_check "
                 "--rows)");
  app.add_option("--mhc-overlap", mhc_overlap,
                 "cuda, DeepSeek-V4.1: compute each mHC site's mixing weights on a side stream while the sublayer "
                 "runs (the same logits; off until an A/B test admits it)")
      ->capture_default_str();
  app.add_option("--engram-data", engram_data,
                 "DeepSeek-V4.1 with Engram layers: safetensors with engram.token_map and engram.multipliers "
                 "(default: DIR/engram_hash.safetensors)");
}

bool ModelSource::is_v41() const {
  if (model_dir.empty()) return false;
  const auto type = model::read_config_json(model_dir).value("model_type", std::string());
  return type == "deepseek_v41" || type == "deepseek_v41_text";
}

void ModelSource::check_backend() const {
#ifdef FRANK_WITH_CUDA
  if (backend != "cpu" && backend != "cuda")
    throw Error(fmt::format("unknown backend '{}' (available: cpu, cuda)", backend));
  if (backend == "cuda") cuda::parse_weight_type(weights_dtype);
#else
  if (backend != "cpu")
    throw Error(fmt::format("backend '{}' is not available in this build (available: cpu; the CUDA backend needs a "
                            "build with -DFRANK_CUDA=ON)",
                            backend));
#endif
}

std::unique_ptr<engine::V41Model> ModelSource::load_v41() const {
  check_backend();
  // The V4.1 forward rounds window rows to FP8 itself and keeps them as fp32 on either backend.
  if (engine::parse_kv_format(kv_dtype) != engine::KvFormat::F32)
    throw Error(fmt::format("--kv-dtype {}: DeepSeek-V4.1 keeps its FP8-rounded K=V rows as fp32", kv_dtype));
  if (!dump_topk_rows.empty()) throw Error("--dump-topk-rows: not available for DeepSeek-V4.1 yet");
  if (!plan.empty() || gpu_memory_budget_gb)
    throw Error("--plan / --gpu-memory-budget: DeepSeek-V4.1's experts cannot be split between GPU and CPU yet");
  model::LoadedV41Model m = [&] {
    try {
      return model::load_v41_model(model_dir, engram_data);
    } catch (const Error& e) {
      if (!engram_data.empty() || std::string(e.what()).find("engram.token_map") == std::string::npos) throw;
      throw Error(std::string(e.what()) + " (give the file with --engram-data FILE)");
    }
  }();
  for (const auto& note : m.notes) std::cerr << "note: " << note << "\n";
  if (!m.unused_tensors.empty())
    std::cerr << fmt::format("warning: {} checkpoint tensor(s) were not used, e.g. '{}'\n", m.unused_tensors.size(),
                             m.unused_tensors.front());
  return std::make_unique<engine::V41Model>(std::move(m));
}

std::unique_ptr<engine::Model> ModelSource::load() const {
  check_backend();
  if (mhc_overlap) throw Error("--mhc-overlap: only DeepSeek-V4.1's single-pass mHC can overlap (give a V4.1 --model)");
  if ((!plan.empty() || gpu_memory_budget_gb) && backend != "cuda")
    throw Error("--plan and --gpu-memory-budget place routed experts between GPU and CPU: they need --backend cuda");
  if (engine::parse_kv_format(kv_dtype) != engine::KvFormat::F32 && backend == "cpu")
    throw Error(fmt::format("--kv-dtype {}: the CPU backend (the fp32 reference) keeps K=V rows in fp32; bf16 and fp8 "
                            "storage need --backend cuda",
                            kv_dtype));
  model::LoadedModel m = model_dir.empty() ? model::synthetic_model(synthetic.empty() ? "tiny" : synthetic, seed)
                                           : model::load_model(model_dir);
  if (!m.unused_tensors.empty()) {
    std::cerr << fmt::format("warning: {} checkpoint tensor(s) were not used, e.g. '{}'\n", m.unused_tensors.size(),
                             m.unused_tensors.front());
  }
  return std::make_unique<engine::Model>(std::move(m.config), std::move(m.weights));
}

#ifdef FRANK_WITH_CUDA
struct Backend::Gpu {
  Gpu(const engine::Model& m, cuda::WeightType t, bool graphs, engine::KvFormat kv)
      : model(m, t, 0, {.enabled = graphs}), kv(kv) {}
  // Homes routed experts on the CPU as the source asks (a bad plan or budget is refused here, before
  // any step): what `serve` logs.
  void place_experts(const engine::Model& m, const ModelSource& source) {
    if (source.plan.empty() && !source.gpu_memory_budget_gb) return;
    const int value_bytes = cuda::parse_weight_type(source.weights_dtype) == cuda::WeightType::BF16 ? 2 : 4;
    const experts::GpuWeightBytes bytes = experts::gpu_weight_bytes(m.config(), m.weights(), value_bytes);
    experts::ExpertHomes homes =
        experts::choose_expert_homes(m.config(), bytes, {source.plan, source.gpu_memory_budget_gb,
                                                         source.expert_cache_slots});
    const size_t cpu = homes.cpu_count(), total = static_cast<size_t>(m.config().num_layers) * m.config().n_routed_experts;
    const size_t slots = experts::usable_cache_slots(homes, source.expert_cache_slots);
    std::cerr << fmt::format("experts: {} of {} routed experts on the CPU ({}), {} GPU cache slots, {:.2f} GB of "
                             "weights and slots on the GPU\n",
                             cpu, total, source.plan.empty() ? "default ordering" : source.plan, slots,
                             (bytes.other + static_cast<double>(total - cpu + slots) * bytes.routed_expert) / 1e9);
    model.device_weights().set_cpu_experts(
        std::make_unique<cuda::CpuExperts>(m.config(), m.weights(), std::move(homes), source.cpu_expert_threads));
    model.device_weights().set_expert_cache(source.expert_cache_slots, {});
  }
  cuda::CudaModel model;
  engine::KvFormat kv;
};
#else
struct Backend::Gpu {};
#endif

Backend::Backend(engine::Model& model, const ModelSource& source) : model_(model) {
  if (!source.dump_topk_rows.empty()) {
    if (source.backend != "cpu") throw Error("--dump-topk-rows: only the CPU backend dumps score rows for now");
    dump_ = std::make_unique<engine::TopkRowDump>(source.dump_topk_rows);
    model_.dump_topk_rows(dump_.get());
  }
#ifdef FRANK_WITH_CUDA
  if (source.backend == "cuda") {
    gpu_ = std::make_unique<Gpu>(model, cuda::parse_weight_type(source.weights_dtype), source.cuda_graphs,
                                 engine::parse_kv_format(source.kv_dtype));
    gpu_->place_experts(model, source);
  }
#else
  (void)source;
#endif
}

Backend::~Backend() {
  model_.dump_topk_rows(nullptr);
  model_.replay_routing(nullptr);
  if (dump_) std::cerr << fmt::format("{} indexer score rows written to {}\n", dump_->rows(), dump_->path().string());
}

bool Backend::is_cpu() const { return gpu_ == nullptr; }

std::unique_ptr<engine::SessionRunner> Backend::new_runner() {
#ifdef FRANK_WITH_CUDA
  if (gpu_) return std::make_unique<cuda::CudaRunner>(gpu_->model, gpu_->kv);
#endif
  return std::make_unique<engine::CpuRunner>(model_);
}

Speculation Backend::new_speculation() {
  // A backend's sessions refer to the model, not to the SessionBackend that made them.
  std::unique_ptr<engine::BackendSession> session = session_backend()->fresh();
  engine::Speculation on_session = session->speculation();
  return {std::move(session), std::move(on_session)};
}

std::unique_ptr<engine::SessionBackend> Backend::session_backend() {
#ifdef FRANK_WITH_CUDA
  if (gpu_) return std::make_unique<cuda::DeviceSessions>(gpu_->model, gpu_->kv);
#endif
  return std::make_unique<engine::HostSessions>(model_);
}

void Backend::replay_routing(engine::RoutingReplay* replay) {
  model_.replay_routing(replay);
#ifdef FRANK_WITH_CUDA
  if (gpu_) gpu_->model.replay_routing(replay);
#endif
}

std::optional<Backend::ExpertCacheTotals> Backend::expert_cache_totals() const {
#ifdef FRANK_WITH_CUDA
  const cuda::ExpertCacheSlots* cache = gpu_ ? gpu_->model.device_weights().expert_cache() : nullptr;
  if (cache == nullptr) return std::nullopt;
  const cuda::ExpertCacheSlots::Counters c = cache->counters();
  return ExpertCacheTotals{c.steps, c.hit_routings, c.miss_routings, c.zero_miss_steps, c.fills, c.evictions};
#else
  return std::nullopt;
#endif
}

std::string Backend::step_summary() const {
#ifdef FRANK_WITH_CUDA
  if (!gpu_) return "";
  // Graph-sized calls by their token count (1: decode steps; 2..8: verify steps and short
  // prefills), the rest together.
  std::vector<std::vector<float>> by_tokens(static_cast<size_t>(cuda::CudaModel::kGraphTokens) + 1);
  double other_ms = 0;
  int64_t other_calls = 0, replayed = 0;
  for (const cuda::StepTime& t : gpu_->model.step_times()) {
    if (t.tokens <= cuda::CudaModel::kGraphTokens) {
      by_tokens[static_cast<size_t>(t.tokens)].push_back(t.ms);
      replayed += t.graph ? 1 : 0;
    } else {
      other_ms += t.ms;
      ++other_calls;
    }
  }
  std::string line = fmt::format("cuda: {} longer call(s) in {:.2f} ms; {} call(s) replayed as graphs", other_calls,
                                 other_ms, replayed);
  for (size_t tokens = 1; tokens < by_tokens.size(); ++tokens) {
    std::vector<float>& ms = by_tokens[tokens];
    if (ms.empty()) continue;
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) { return ms[static_cast<size_t>(q * static_cast<double>(ms.size() - 1))]; };
    line += fmt::format("; {} {}-token step(s): median {:.3f} ms, p10-p90 {:.3f}-{:.3f} ms", ms.size(), tokens,
                        at(0.5), at(0.1), at(0.9));
  }
  line += " (GPU time, CUDA events)";
  if (const auto c = expert_cache_totals())
    line += fmt::format("; GPU expert cache: {} routings to CPU-homed experts hit a copy, {} missed; {} of {} steps "
                        "without a miss; {} fills, {} evictions",
                        c->hit_routings, c->miss_routings, c->zero_miss_steps, c->steps, c->fills, c->evictions);
  return line;
#else
  return "";
#endif
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const char* first = text.data() + begin;
    const char* last = text.data() + end;
    int32_t id = 0;
    auto [ptr, ec] = std::from_chars(first, last, id);
    if (first == last || ec != std::errc() || ptr != last || id < 0)
      throw Error(fmt::format("--ids: '{}' is not a non-negative integer (expected e.g. 5,17,3)",
                              std::string(first, last)));
    ids.push_back(id);
    begin = end + 1;
  }
  return ids;
}

std::string format_ids(const std::vector<int32_t>& ids) { return fmt::format("{}", fmt::join(ids, ",")); }

}  // namespace frank::cli
