#include "frank/server/http_server.h"

#include <fmt/format.h>

#include <iostream>

#include "frank/core/error.h"
#include "frank/server/api_error.h"
#include "frank/server/chat_completions.h"
#include "frank/server/completions.h"
#include "frank/server/prefix_cached_sessions.h"
#include "frank/server/request_fields.h"

namespace frank::server {
namespace {

using nlohmann::json;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json");
}

}  // namespace

RequestSessions& HttpServer::sessions(const engine::Model& model, const ServerOptions& o,
                                      engine::SessionBackend* device) {
  size_t resident = 0;
  if (device != nullptr) {
    if (!o.record_routing.empty())
      throw Error(
          "--record-routing works on the CPU backend only for now (routing traces read the routed experts of host "
          "sessions); leave it out or serve with --backend cpu");
    resident = o.gpu_sessions;
  } else {
    host_sessions_ = std::make_unique<engine::HostSessions>(model);
    device = host_sessions_.get();
  }
  if (o.prefix_cache_bytes > 0) prefix_cache_ = std::make_unique<engine::PrefixCache>(o.prefix_cache_bytes);
  if (!o.prefix_cache_dir.empty())
    prefix_store_ = std::make_unique<engine::PrefixStore>(
        o.prefix_cache_dir, model, [](const std::string& warning) { std::cerr << "warning: " << warning << "\n"; },
        o.prefix_cache_disk_bytes);
  sessions_ =
      std::make_unique<PrefixCachedSessions>(*device, prefix_cache_.get(), prefix_store_.get(), metrics_, resident);
  return *sessions_;
}

RoutingRecorder* HttpServer::routing_recorder(const engine::Model& model, const ServerOptions& o) {
  if (!o.record_routing.empty()) routing_ = std::make_unique<RoutingRecorder>(o.record_routing, model.config());
  return routing_.get();
}

HttpServer::HttpServer(const engine::Model& model, const model::Tokenizer& tokenizer, ServerOptions options,
                       engine::SessionBackend* device)
    : worker_(model, sessions(model, options, device), metrics_, options.context_length,
              options.prefix_checkpoint_interval, options.debug, options.draft_tokens,
              routing_recorder(model, options)),
      scheduler_(options.max_queue, [this](Job& job) { worker_.execute(job); }),
      ctx_{model, tokenizer, std::move(options), metrics_, scheduler_} {
  EngineWorker::declare_metrics(metrics_);
  metrics_.declare_gauge("frank_queue_depth", "Requests waiting in the queue");
  metrics_.declare_gauge("frank_uptime_seconds", "Seconds since the server started");
  metrics_.declare_gauge("frank_model_info", "The served model (value 1)");
  metrics_.declare_gauge("frank_prefix_cache_bytes", "Bytes held by the prefix cache");
  metrics_.declare_gauge("frank_prefix_cache_conversations", "Conversations kept by the prefix cache");
  const auto& c = model.config();
  metrics_.set("frank_model_info", 1,
               {{"model", ctx_.options.model_name},
                {"model_type", c.model_type},
                {"layers", std::to_string(c.num_layers)},
                {"vocab_size", std::to_string(c.vocab_size)},
                {"context_length", std::to_string(ctx_.options.context_length)}});
  install_routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::install_routes() {
  auto& o = ctx_.options;
  http_.set_payload_max_length(o.max_body_bytes);
  // Every waiting request holds a handler thread (it streams its own response), so the pool must
  // outnumber the queue; the spare threads answer /health, /metrics and 429s meanwhile.
  http_.new_task_queue = [n = o.max_queue + 8] { return new httplib::ThreadPool(n); };

  // Every route but /health needs the API key when one is set.
  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (ctx_.options.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + ctx_.options.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    send_json(res, 401, ApiError(401, "missing or wrong API key (send 'Authorization: Bearer KEY')").body());
    return httplib::Server::HandlerResponse::Handled;
  });
  http_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      send_json(res, e.status, e.body());
    } catch (const Error& e) {
      send_json(res, 400, ApiError(400, e.what()).body());
    } catch (const std::exception& e) {
      send_json(res, 500, ApiError(500, std::string("internal error: ") + e.what()).body());
    }
  });
  // Errors httplib produces itself (unknown route, body too large) get the same JSON shape.
  http_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message = res.status == 404   ? fmt::format("no route {} {}", req.method, req.path)
                                : res.status == 413 ? "request body too large"
                                                    : fmt::format("HTTP {}", res.status);
    send_json(res, res.status, ApiError(res.status, message).body());
  });

  http_.Get("/health", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    metrics_.set("frank_queue_depth", static_cast<double>(scheduler_.waiting()));
    metrics_.set("frank_uptime_seconds", std::chrono::duration<double>(Clock::now() - started_).count());
    metrics_.set("frank_prefix_cache_bytes", prefix_cache_ ? static_cast<double>(prefix_cache_->bytes()) : 0);
    metrics_.set("frank_prefix_cache_conversations",
                 prefix_cache_ ? static_cast<double>(prefix_cache_->conversations()) : 0);
    for (const auto& refresh : refreshers_) refresh(metrics_);
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", ctx_.options.model_name},
                                      {"object", "model"},
                                      {"created", unix_time()},
                                      {"owned_by", "frank"},
                                      {"max_model_len", ctx_.options.context_length}}})}});
  });
  http_.Post("/v1/chat/completions",
             [this](const httplib::Request& req, httplib::Response& res) { handle_chat_completions(ctx_, req, res); });
  http_.Post("/v1/completions",
             [this](const httplib::Request& req, httplib::Response& res) { handle_completions(ctx_, req, res); });
  http_.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req.body);
    const RequestFields f(body);
    const auto text = f.get<std::string>("prompt", "");
    const auto ids = ctx_.tokenizer.encode(text, f.get<bool>("add_special_tokens", true));
    send_json(res, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx_.options.context_length}});
  });
  http_.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req.body);
    if (!body.contains("tokens")) throw ApiError(400, "'tokens' is required", "tokens");
    const auto ids = RequestFields(body).token_ids("tokens", ctx_.tokenizer.vocab_size());
    send_json(res, 200, {{"prompt", ctx_.tokenizer.decode(ids)}});
  });
}

int HttpServer::bind() {
  const auto& o = ctx_.options;
  const int port = o.port == 0 ? http_.bind_to_any_port(o.host) : (http_.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) throw Error(fmt::format("cannot listen on {}:{} (in use, or not a local address?)", o.host, o.port));
  return port;
}

void HttpServer::serve() { http_.listen_after_bind(); }

void HttpServer::stop() { http_.stop(); }

}  // namespace frank::server
