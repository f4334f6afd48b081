#pragma once
// What the chat and completions responses share: the envelope (id, object, created, model),
// streaming flags, usage, errors after the status was sent, and the end of an SSE stream.
#include <nlohmann/json.hpp>
#include <string>

#include "frank/server/api_error.h"
#include "frank/server/job_stream.h"
#include "frank/server/request_fields.h"
#include "frank/server/server_context.h"

namespace frank::server {

class OpenAiWriter : public ResponseWriter {
 public:
  OpenAiWriter(const ServerContext& ctx, const nlohmann::json& body, const char* id_prefix)
      : ctx_(ctx), id_(new_request_id(id_prefix)) {
    const RequestFields f(body);
    stream_ = f.get<bool>("stream", false);
    include_usage_ = stream_ && f.has("stream_options") && f.raw("stream_options").is_object() &&
                     f.raw("stream_options").value("include_usage", false);
  }

  std::string heartbeat() const override { return stream_ ? ": keep-alive\n\n" : " "; }
  const char* content_type() const { return stream_ ? "text/event-stream" : "application/json"; }

 protected:
  nlohmann::json envelope(const char* object, nlohmann::json choices) const {
    return {{"id", id_}, {"object", object}, {"created", created_}, {"model", ctx_.options.model_name},
            {"choices", std::move(choices)}};
  }
  static nlohmann::json usage(const JobEnd& end) {
    return {{"prompt_tokens", end.prompt_tokens},
            {"completion_tokens", end.completion_tokens},
            {"total_tokens", end.prompt_tokens + end.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", end.cached_tokens}}}};
  }
  // The whole non-streaming reply.
  std::string reply(const char* object, nlohmann::json choice, const JobEnd& end) const {
    nlohmann::json doc = envelope(object, nlohmann::json::array({std::move(choice)}));
    doc["usage"] = usage(end);
    return json_text(doc);
  }
  // After the last chunk of a stream: the usage chunk when asked for, then [DONE].
  std::string stream_end(const char* chunk_object, const JobEnd& end) const {
    std::string out;
    if (include_usage_) {
      nlohmann::json doc = envelope(chunk_object, nlohmann::json::array());
      doc["usage"] = usage(end);
      out = sse_event(doc);
    }
    return out + "data: [DONE]\n\n";
  }
  // A failure after the 200 status went out: an error object in the body (or the stream).
  std::string failure(const JobEnd& end) const {
    const ApiError e(500, "generation failed: " + end.error);
    return stream_ ? sse_event(e.body()) + "data: [DONE]\n\n" : json_text(e.body());
  }

  const ServerContext& ctx_;
  const std::string id_;
  const int64_t created_ = unix_time();
  bool stream_ = false;
  bool include_usage_ = false;
};

}  // namespace frank::server
