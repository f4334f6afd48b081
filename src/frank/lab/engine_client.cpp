#include "frank/lab/engine_client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <exception>

#include "frank/core/error.h"

namespace frank::lab {
namespace {

using nlohmann::json;

HttpReply reply_of(const httplib::Result& result, std::string body) {
  HttpReply reply;
  if (!result) {
    reply.error = httplib::to_string(result.error());
    return reply;
  }
  reply.status = result->status;
  reply.body = body.empty() ? result->body : std::move(body);
  return reply;
}

// Splits an SSE byte stream into events and hands each "data:" payload on; tolerant of CRLF and
// of events split across network reads.
class SseParser {
 public:
  explicit SseParser(const std::function<void(const json&)>& on_event) : on_event_(on_event) {}
  void feed(const char* data, size_t size) {
    buffer_.append(data, size);
    for (size_t end; (end = buffer_.find('\n')) != std::string::npos;) {
      std::string line = buffer_.substr(0, end);
      buffer_.erase(0, end + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.rfind("data:", 0) != 0) continue;  // comments (heartbeats), event names, blank lines
      const std::string payload = line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
      if (payload == "[DONE]") continue;
      json event = json::parse(payload, nullptr, /*allow_exceptions=*/false);
      if (event.is_discarded()) throw Error(fmt::format("the server streamed an event that is not JSON: {}", payload));
      on_event_(event);
    }
  }

 private:
  const std::function<void(const json&)>& on_event_;
  std::string buffer_;
};

}  // namespace

std::string HttpReply::failure() const {
  return status == 0 ? "no reply: " + error : fmt::format("HTTP {}: {}", status, body.substr(0, 500));
}

EngineClient::EngineClient(const std::string& base_url, std::chrono::seconds timeout) : base_url_(base_url) {
  if (base_url.rfind("http://", 0) != 0)
    throw Error(fmt::format("engine URL '{}': only http:// URLs are supported", base_url));
  const size_t path_at = base_url.find('/', 7);
  const std::string host_port = path_at == std::string::npos ? base_url : base_url.substr(0, path_at);
  prefix_ = path_at == std::string::npos ? "" : base_url.substr(path_at);
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
  client_ = std::make_unique<httplib::Client>(host_port);
  if (!client_->is_valid()) throw Error(fmt::format("engine URL '{}' is not a valid address", base_url));
  client_->set_connection_timeout(std::chrono::seconds(5));
  client_->set_read_timeout(timeout);
  client_->set_write_timeout(timeout);
}

EngineClient::~EngineClient() = default;

HttpReply EngineClient::get(const std::string& path) { return reply_of(client_->Get(prefix_ + path), ""); }

HttpReply EngineClient::post_json(const std::string& path, const json& body) {
  return reply_of(client_->Post(prefix_ + path, body.dump(), "application/json"), "");
}

HttpReply EngineClient::post_stream(const std::string& path, const json& body,
                                    const std::function<void(const json&)>& on_event) {
  httplib::Request request;
  request.method = "POST";
  request.path = prefix_ + path;
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  request.set_header("Accept", "text/event-stream");
  SseParser parser(on_event);
  std::string raw;  // kept for error replies, which are JSON, not SSE
  int status = 0;
  request.response_handler = [&](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  // An exception must not unwind through cpp-httplib: it is kept, the transfer aborted, and the
  // exception rethrown here.
  std::exception_ptr failure;
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    try {
      if (status >= 200 && status < 300) parser.feed(data, size);
      else raw.append(data, size);
      return true;
    } catch (...) {
      failure = std::current_exception();
      return false;
    }
  };
  HttpReply reply = reply_of(client_->send(request), std::move(raw));
  if (failure) std::rethrow_exception(failure);
  return reply;
}

std::string served_model_id(EngineClient& client) {
  const HttpReply reply = client.get("/v1/models");
  if (!reply.ok())
    throw Error(fmt::format("{}/v1/models: {}", client.base_url(), reply.failure()));
  const json doc = json::parse(reply.body, nullptr, false);
  if (doc.is_discarded() || !doc.contains("data") || !doc["data"].is_array() || doc["data"].empty() ||
      !doc["data"][0].contains("id") || !doc["data"][0]["id"].is_string())
    throw Error(fmt::format("{}/v1/models: no model listed", client.base_url()));
  return doc["data"][0]["id"].get<std::string>();
}

}  // namespace frank::lab
