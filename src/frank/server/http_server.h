#pragma once
// frank's OpenAI-compatible HTTP server: routes, authentication, body limits and JSON errors
// around the scheduler and the engine worker.
#include <httplib.h>

#include <memory>

#include "frank/engine/prefix_cache.h"
#include "frank/engine/prefix_store.h"
#include "frank/server/continued_sessions.h"
#include "frank/server/engine_worker.h"
#include "frank/server/server_context.h"

namespace frank::server {

class HttpServer {
 public:
  // Requests run on the CPU reference with the prefix cache, or, when `device_runners` is given, on
  // the sessions it makes (ContinuedSessions: `frank serve --backend cuda`); the prefix cache,
  // speculative decoding and routing traces must then be off in `options` (else frank::Error).
  HttpServer(const engine::Model& model, const model::Tokenizer& tokenizer, ServerOptions options,
             ContinuedSessions::NewRunner device_runners = {});
  ~HttpServer();

  // Binds host:port (port 0 picks a free one) and returns the port; throws frank::Error on failure.
  int bind();
  void serve();  // blocks until stop()
  void stop();

 private:
  void install_routes();
  RequestSessions& sessions(const engine::Model& model, const ServerOptions& options,
                            ContinuedSessions::NewRunner device_runners);
  RoutingRecorder* routing_recorder(const engine::Model& model, const ServerOptions& options);

  Metrics metrics_;
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
