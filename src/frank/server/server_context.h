#pragma once
// What every route handler needs: the model, its tokenizer, the scheduler, metrics and options.
#include <chrono>
#include <memory>
#include <string>

#include "frank/engine/model.h"
#include "frank/model/tokenizer.h"
#include "frank/server/engine_worker.h"
#include "frank/server/job.h"
#include "frank/server/metrics.h"
#include "frank/server/scheduler.h"

namespace frank::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;               // empty: no authentication
  size_t max_queue = 64;             // requests that may wait besides the running one
  int context_length = 8192;         // prompt + completion tokens per request
  size_t max_body_bytes = 8u << 20;  // larger bodies get 413
  std::string model_name;  // reported by the API (set by `frank serve`)
  std::chrono::milliseconds heartbeat{200};  // how often an idle response checks its client
  size_t prefix_cache_bytes = size_t{2} << 30;  // 0: no prefix cache
  std::string prefix_cache_dir;                 // empty: the prefix cache is not persisted
  uint64_t prefix_cache_disk_bytes = uint64_t{16} << 30;  // 0: the directory may grow without limit
  int64_t prefix_checkpoint_interval = 1024;
  size_t gpu_sessions = 4;  // --backend cuda: ended conversations whose sessions stay in GPU memory (LRU)
  int max_logprobs = 20;  // the most alternatives a request may ask for per token
  int draft_tokens = 3;   // speculative decoding with the MTP block (0: off; kAutoDraftTokens: chosen by cost)
  std::string record_routing;  // append every step's routed experts to this trace (empty: off)
  EngineDebugOptions debug;
};

struct ServerContext {
  const engine::Model& model;
  const model::Tokenizer& tokenizer;
  ServerOptions options;
  Metrics& metrics;
  Scheduler& scheduler;

  // Submits a job or throws ApiError 429 when the queue is full.
  std::shared_ptr<Job> submit(GenerationRequest request);
  // Common sampling/length fields of chat and completions requests.
  GenerationRequest generation_fields(const nlohmann::json& body, std::vector<int32_t> prompt) const;
  // How a token is named in logprobs: its text, or "token_id:N" when the request sets
  // `return_tokens_as_token_ids` (vLLM's extension: texts of different tokens can coincide).
  std::string token_name(int32_t id, bool as_ids) const;
};

std::string new_request_id(const char* prefix);
int64_t unix_time();

}  // namespace frank::server
