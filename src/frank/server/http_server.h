#pragma once
// frank's OpenAI-compatible HTTP server: routes, authentication, body limits and JSON errors
// around the scheduler and the engine worker.
#include <httplib.h>

#include <functional>
#include <memory>
#include <vector>

#include "frank/engine/prefix_cache.h"
#include "frank/engine/prefix_store.h"
#include "frank/engine/session_backend.h"
#include "frank/server/engine_worker.h"
#include "frank/server/server_context.h"

namespace frank::server {

class HttpServer {
 public:
  // Requests run on the CPU reference, or, when `device` is given, on its sessions (`frank serve
  // --backend cuda`; options.gpu_sessions of them stay resident); both with the prefix cache.
  // Speculative decoding and routing traces need host sessions: on a device they must be off in
  // `options` (else frank::Error).
  HttpServer(const engine::Model& model, const model::Tokenizer& tokenizer, ServerOptions options,
             engine::SessionBackend* device = nullptr);
  ~HttpServer();

  // Binds host:port (port 0 picks a free one) and returns the port; throws frank::Error on failure.
  int bind();
  void serve();  // blocks until stop()
  void stop();

  // Metrics the backend keeps (the GPU expert cache's counters): declared by the caller in
  // metrics(), brought up to date by `refresh` before each /metrics render. Before serve().
  Metrics& metrics() { return metrics_; }
  void refresh_metrics_with(std::function<void(Metrics&)> refresh) { refreshers_.push_back(std::move(refresh)); }

 private:
  void install_routes();
  RequestSessions& sessions(const engine::Model& model, const ServerOptions& options,
                            engine::SessionBackend* device);
  RoutingRecorder* routing_recorder(const engine::Model& model, const ServerOptions& options);

  Metrics metrics_;
  std::vector<std::function<void(Metrics&)>> refreshers_;
  std::unique_ptr<engine::HostSessions> host_sessions_;  // the CPU reference's, when no device is given
  std::unique_ptr<engine::PrefixCache> prefix_cache_;
  std::unique_ptr<engine::PrefixStore> prefix_store_;
  std::unique_ptr<RoutingRecorder> routing_;
  std::unique_ptr<RequestSessions> sessions_;
  EngineWorker worker_;
  Scheduler scheduler_;
  ServerContext ctx_;
  httplib::Server http_;
  const Clock::time_point started_ = Clock::now();
};

}  // namespace frank::server
