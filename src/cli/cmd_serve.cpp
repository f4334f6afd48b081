// `frank serve`: the OpenAI-compatible HTTP server.
#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "frank/core/error.h"
#include "frank/model/tokenizer.h"
#include "frank/server/http_server.h"
#include "model_source.h"

namespace frank::cli {
namespace {

struct ServeOptions {
  ModelSource source;
  std::string tokenizer;
  server::ServerOptions server;
  double max_body_mb = 8;
  double prefix_cache_gb = 2;
  double prefix_cache_disk_gb = 16;
  std::string draft_tokens = "3";
  // Given on the command line (its default is the CPU backend's; --backend cuda drafts only when asked).
  const CLI::Option* draft_tokens_option = nullptr;
  const CLI::Option* gpu_sessions_option = nullptr;
};

server::HttpServer* g_server = nullptr;

void on_signal(int) {
  if (g_server != nullptr) g_server->stop();
}

// The tokenizer: --tokenizer, else the checkpoint's tokenizer.json, else DeepSeek-V4's (shipped).
std::filesystem::path tokenizer_path(const ServeOptions& o) {
  if (!o.tokenizer.empty()) return o.tokenizer;
  if (!o.source.model_dir.empty()) {
    const auto in_model = std::filesystem::path(o.source.model_dir) / "tokenizer.json";
    if (std::filesystem::exists(in_model)) return in_model;
  }
  return FRANK_DEFAULT_TOKENIZER;
}

// Runs one token on a fresh device session, so that the weights are uploaded and any device
// failure (memory, unsupported weight format) stops the server before it listens.
// The GPU expert cache's counters (cuda/expert_cache_slots.h) in /metrics.
void export_expert_cache(const Backend& backend, server::HttpServer& http) {
  server::Metrics& m = http.metrics();
  m.declare_counter("frank_expert_cache_steps_total", "Steps seen by the GPU expert cache");
  m.declare_counter("frank_expert_cache_hit_routings_total", "Routings to CPU-homed experts run on a GPU copy");
  m.declare_counter("frank_expert_cache_miss_routings_total", "Routings to CPU-homed experts run on the CPU");
  m.declare_counter("frank_expert_cache_zero_miss_steps_total", "Steps with no routing run on the CPU");
  m.declare_counter("frank_expert_cache_fills_total", "Experts copied into GPU cache slots");
  m.declare_counter("frank_expert_cache_evictions_total", "Experts evicted from GPU cache slots");
  http.refresh_metrics_with([&backend](server::Metrics& metrics) {
    const Backend::ExpertCacheTotals c = *backend.expert_cache_totals();
    metrics.set_total("frank_expert_cache_steps_total", static_cast<double>(c.steps));
    metrics.set_total("frank_expert_cache_hit_routings_total", static_cast<double>(c.hit_routings));
    metrics.set_total("frank_expert_cache_miss_routings_total", static_cast<double>(c.miss_routings));
    metrics.set_total("frank_expert_cache_zero_miss_steps_total", static_cast<double>(c.zero_miss_steps));
    metrics.set_total("frank_expert_cache_fills_total", static_cast<double>(c.fills));
    metrics.set_total("frank_expert_cache_evictions_total", static_cast<double>(c.evictions));
  });
}

void warm_up(const engine::Model& model, Backend& backend) {
  const auto start = std::chrono::steady_clock::now();
  const int32_t bos = model.config().bos_token_id;
  backend.new_runner()->forward(std::span<const int32_t>(&bos, 1), engine::Model::Logits::Last);
  std::cout << fmt::format("weights uploaded to the GPU in {:.1f} s\n",
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count())
            << std::flush;
}

void run(ServeOptions o) {
  if (o.source.model_dir.empty() && o.source.synthetic.empty()) o.source.synthetic = "tiny-chat";
  if (!o.source.dump_topk_rows.empty()) throw Error("--dump-topk-rows applies to logits and generate");
  const bool on_cpu = o.source.backend == "cpu";
  if (!on_cpu && o.draft_tokens_option->count() == 0) o.draft_tokens = "0";
  if (on_cpu && o.gpu_sessions_option->count() > 0)
    throw Error("--gpu-sessions applies to --backend cuda (the CPU backend's sessions live in host memory)");
  const auto tokenizer = model::Tokenizer::load(tokenizer_path(o));
  const auto model = o.source.load();
  if (o.server.debug.step_delay_ms > 0 || o.server.debug.logit_noise > 0)
    std::cout << "warning: --debug-* options are set: this server is deliberately slowed or perturbed\n";
  if (tokenizer.vocab_size() > model->config().vocab_size)
    throw Error(fmt::format("the tokenizer has {} tokens but the model's vocabulary is {}", tokenizer.vocab_size(),
                            model->config().vocab_size));
  o.server.max_body_bytes = static_cast<size_t>(o.max_body_mb * (1 << 20));
  o.server.prefix_cache_bytes = static_cast<size_t>(o.prefix_cache_gb * (1 << 30));
  o.server.prefix_cache_disk_bytes = static_cast<uint64_t>(o.prefix_cache_disk_gb * (1 << 30));
  if (o.server.model_name.empty())
    o.server.model_name = o.source.model_dir.empty() ? "frank-synthetic-" + o.source.synthetic
                                                     : std::filesystem::path(o.source.model_dir).filename().string();
  o.server.draft_tokens = parse_draft_tokens(o.draft_tokens);
  const bool drafting = o.server.draft_tokens != 0 && model->weights().mtp.has_value();
  if (o.server.draft_tokens != 0 && !drafting) {
    if (o.draft_tokens_option->count() > 0)
      throw Error(fmt::format("--draft-tokens {}: the model has no MTP block (mtp.0.*) to draft with; serve with "
                              "--draft-tokens 0",
                              o.draft_tokens));
    std::cout << "note: the model has no MTP block (mtp.0.*): speculative decoding is off\n";
  }
  Backend backend(*model, o.source);  // --backend cuda: fails here without a GPU
  if (drafting && o.server.draft_tokens != server::kAutoDraftTokens) {
    // The bound of one verify call on this backend (the sliding window; on the GPU also the
    // largest captured step), read from a session made for it.
    const int most = backend.new_speculation().on_session.target->max_verify_tokens() - 1;
    if (o.server.draft_tokens > most)
      throw Error(fmt::format("--draft-tokens must be at most {} on --backend {} (a verify step feeds the drafts "
                              "and one more token)",
                              most, o.source.backend));
  }
  std::unique_ptr<engine::SessionBackend> device_sessions;
  if (!backend.is_cpu()) device_sessions = backend.session_backend();
  server::HttpServer http(*model, tokenizer, o.server, device_sessions.get());
  if (backend.expert_cache_totals()) export_expert_cache(backend, http);
  if (!backend.is_cpu()) warm_up(*model, backend);
  const int port = http.bind();
  g_server = &http;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const auto url = fmt::format("http://{}:{}", o.server.host, port);
  std::cout << fmt::format("frank serving '{}' on {} (OpenAI API under {}/v1)\n", o.server.model_name, url, url);
  if (!backend.is_cpu())
    std::cout << fmt::format(
                     "prefix cache: the last {} conversations' sessions stay in GPU memory, up to {:.3g} GiB of "
                     "conversations in host memory (--gpu-sessions, --prefix-cache-gb)\n",
                     o.server.gpu_sessions, o.prefix_cache_gb)
              << std::flush;
  if (!o.source.synthetic.empty())
    std::cout << "note: synthetic model with random weights: its words are random; use --model DIR for a real one\n";
  // The CPU backend keeps K=V rows in fp32.
  std::cout << format_kv_capacity_line(model->config(), engine::KvFormat::F32, o.server.context_length) << "\n";
  std::cout << fmt::format(
                   "try: curl {}/v1/chat/completions -H 'Content-Type: application/json' "
                   "-d '{{\"model\":\"{}\",\"messages\":[{{\"role\":\"user\",\"content\":\"Hello\"}}],"
                   "\"max_tokens\":16}}'\n",
                   url, o.server.model_name)
            << std::flush;
  http.serve();
  g_server = nullptr;
  std::cout << "frank: stopped\n";
}

}  // namespace

void register_serve(CLI::App& app) {
  auto opts = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (default: the embedded synthetic model)");
  opts->source.add_options(*cmd);
  cmd->add_option("--tokenizer", opts->tokenizer, "tokenizer.json (default: the model's, else DeepSeek-V4's)");
  cmd->add_option("--host", opts->server.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", opts->server.port, "port (0: any free port)")->capture_default_str()->check(
      CLI::Range(0, 65535));
  cmd->add_option("--api-key", opts->server.api_key, "require 'Authorization: Bearer KEY' (all routes but /health)");
  cmd->add_option("--max-queue", opts->server.max_queue, "requests that may wait; more get HTTP 429")
      ->capture_default_str();
  cmd->add_option("--ctx", opts->server.context_length, "context length per request (prompt + completion)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-body-mb", opts->max_body_mb, "largest request body; larger ones get HTTP 413")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--prefix-cache-gb", opts->prefix_cache_gb,
                  "host memory for kept conversations and their checkpoints (0: no prefix cache)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  opts->gpu_sessions_option = cmd->add_option("--gpu-sessions", opts->server.gpu_sessions,
                  "--backend cuda: ended conversations whose sessions stay in GPU memory, least recently used "
                  "evicted first (a turn continuing one uploads nothing; 0: every resume uploads from host memory)")
      ->capture_default_str();
  cmd->add_option("--prefix-cache-dir", opts->server.prefix_cache_dir,
                  "also keep conversations on disk here, so a restarted server resumes them");
  cmd->add_option("--prefix-cache-disk-gb", opts->prefix_cache_disk_gb,
                  "most disk the kept conversations may take; the least recently used go first (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefix-checkpoint-interval", opts->server.prefix_checkpoint_interval,
                  "tokens between session checkpoints (a new prompt can resume from any of them)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--served-model-name", opts->server.model_name, "model id reported by the API");
  cmd->add_option("--max-logprobs", opts->server.max_logprobs,
                  "most alternatives per token a request may ask for (logprobs / top_logprobs)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  opts->draft_tokens_option =
      cmd->add_option("--draft-tokens", opts->draft_tokens,
                      "speculative decoding: tokens the model's MTP block drafts per verify step (0: off; auto: "
                      "chosen from measured step costs; default 3 on the CPU backend, 0 with --backend cuda)")
          ->capture_default_str();
  cmd->add_option("--record-routing", opts->server.record_routing,
                  "append every step's routed experts to FILE (a routing trace for `frank plan build`)");
  cmd->add_option("--debug-step-delay-ms", opts->server.debug.step_delay_ms,
                  "lab self-tests: sleep this long after every forward step (a deliberately slower arm)")
      ->group("Debugging")
      ->check(CLI::Range(0, 60000));
  cmd->add_option("--debug-logit-noise", opts->server.debug.logit_noise,
                  "lab self-tests: add a fixed pseudo-random offset in [-X, X] to every logit (a deliberately "
                  "perturbed arm)")
      ->group("Debugging")
      ->check(CLI::Range(0.0, 100.0));
  cmd->callback([opts] { run(*opts); });
}

}  // namespace frank::cli
