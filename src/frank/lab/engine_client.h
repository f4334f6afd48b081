#pragma once
// A small HTTP client for the OpenAI-compatible engines the lab measures: plain requests for
// health, model lists and /metrics, and streamed (SSE) requests whose chunks are timed as they
// arrive. Any engine works (frank, vLLM, llama.cpp's server); only http:// URLs are supported.
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace httplib {
class Client;
}

namespace frank::lab {

struct HttpReply {
  int status = 0;  // 0: no connection
  std::string body;
  std::string error;  // why there was no reply (connection refused, timeout), for status 0
  bool ok() const { return status >= 200 && status < 300; }
  // Why it failed, for messages: "no reply: <error>" or "HTTP <status>: <start of the body>".
  std::string failure() const;
};

class EngineClient {
 public:
  // base_url: "http://host:port" (a path prefix such as "/api" is kept); throws frank::Error on
  // anything else. `timeout` bounds each read.
  EngineClient(const std::string& base_url, std::chrono::seconds timeout);
  ~EngineClient();
  EngineClient(const EngineClient&) = delete;
  EngineClient& operator=(const EngineClient&) = delete;

  HttpReply get(const std::string& path);
  HttpReply post_json(const std::string& path, const nlohmann::json& body);
  // POSTs `body` and calls on_event with each SSE `data:` payload parsed as JSON, as it arrives
  // (the final "[DONE]" is not passed on). Returns the status; on a non-2xx status the reply's
  // body holds what the server said.
  HttpReply post_stream(const std::string& path, const nlohmann::json& body,
                        const std::function<void(const nlohmann::json&)>& on_event);

  const std::string& base_url() const { return base_url_; }

 private:
  std::string base_url_, prefix_;
  std::unique_ptr<httplib::Client> client_;
};

// The id of the first model in GET /v1/models (what requests must name on engines like vLLM).
std::string served_model_id(EngineClient& client);

}  // namespace frank::lab
