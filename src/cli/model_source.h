#pragma once
// Options shared by the subcommands that run a model: where it comes from (--model DIR or
// --synthetic NAME, the embedded default when neither is given) and the token ids to feed.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frank/engine/model.h"
#include "frank/engine/session_backend.h"
#include "frank/engine/session_runner.h"
#include "frank/engine/speculative.h"
#include "frank/engine/v41_model.h"
#include "frank/engine/verify_target.h"
#include "frank/experts/expert_cache.h"

namespace frank::cli {

struct ModelSource {
  std::string model_dir;
  std::string synthetic;
  uint64_t seed = 0;
  std::string backend = "cpu";
  std::string weights_dtype = "bf16";
  bool cuda_graphs = true;
  std::string kv_dtype = "fp32";  // how the session stores K=V rows (cuda: fp32 | bf16 | fp8; cpu: fp32 only)
  std::string dump_topk_rows;  // a directory: the indexer's score rows of the run (CPU backend)
  std::string engram_data;     // DeepSeek-V4.1: the Engram token map and multipliers (safetensors)
  bool mhc_overlap = false;    // cuda, DeepSeek-V4.1: hc_map on a branch stream (cuda::BranchStream)
  // cuda: routed experts split between GPU memory and CPU RAM (experts/expert_homes.h).
  std::string plan;
  std::optional<double> gpu_memory_budget_gb;
  unsigned cpu_expert_threads = 0;
  size_t expert_cache_slots = experts::kDefaultCacheSlots;  // GPU copies of CPU-homed experts (cuda/expert_cache_slots.h)

  void add_options(CLI::App& app);
  // Loads the model (on the host; a GPU backend uploads from it); prints a warning for checkpoint
  // tensors it did not use. Throws frank::Error for a backend this build does not have.
  std::unique_ptr<engine::Model> load() const;
  // True when --model names a DeepSeek-V4.1 checkpoint (config.json model_type deepseek_v41).
  bool is_v41() const;
  // Loads it on the host (V41Backend puts it on the GPU); prints what the loader skipped. Throws
  // frank::Error for options V4.1 does not support.
  std::unique_ptr<engine::V41Model> load_v41() const;
  // Throws frank::Error for a --backend (or its --weights-dtype) this build does not have.
  void check_backend() const;
};

// Speculative decoding on a fresh session of a backend: the verify target over it and the model's
// MTP block drafting where the backend computes (engine::BackendSession::speculation). They refer
// to the session, so they come after it (and are destroyed before it).
struct Speculation {
  std::unique_ptr<engine::BackendSession> session;
  engine::Speculation on_session;
};

// The backend a command computes on: the CPU reference, or the GPU (builds with -DFRANK_CUDA=ON).
class Backend {
 public:
  // Also starts the --dump-topk-rows dump when asked for.
  Backend(engine::Model& model, const ModelSource& source);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  bool is_cpu() const;
  // A fresh session on this backend.
  std::unique_ptr<engine::SessionRunner> new_runner();
  // A fresh session on this backend and the MTP drafter, for speculative decoding. Throws
  // frank::Error when the checkpoint has no MTP block.
  Speculation new_speculation();
  // This backend's sessions as the server's prefix cache keeps them.
  std::unique_ptr<engine::SessionBackend> session_backend();
  // One line on the GPU time of the calls so far (CUDA events), or "" on the CPU backend.
  std::string step_summary() const;
  // The GPU expert cache's counters so far (cuda/expert_cache_slots.h), or nothing without one.
  // Safe to call from another thread than the one running steps.
  struct ExpertCacheTotals {
    uint64_t steps, hit_routings, miss_routings, zero_miss_steps, fills, evictions;
  };
  std::optional<ExpertCacheTotals> expert_cache_totals() const;
  // Later forward calls on this backend route to `replay`'s experts (null: the router chooses).
  void replay_routing(engine::RoutingReplay* replay);

 private:
  struct Gpu;
  engine::Model& model_;
  std::unique_ptr<Gpu> gpu_;
  std::unique_ptr<engine::TopkRowDump> dump_;
};

// "5,17,3" -> {5, 17, 3}; throws frank::Error on anything that is not a comma-separated list of
// non-negative integers.
std::vector<int32_t> parse_ids(const std::string& text);
std::string format_ids(const std::vector<int32_t>& ids);

}  // namespace frank::cli
