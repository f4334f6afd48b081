#include "frank/server/chat_completions.h"

#include <algorithm>
#include <iostream>
#include <optional>

#include "frank/core/error.h"
#include "frank/model/chat_encoding.h"
#include "frank/model/chat_markup.h"
#include "frank/model/chat_parser.h"
#include "frank/server/api_error.h"
#include "frank/server/openai_writer.h"
#include "frank/server/request_fields.h"
#include "frank/server/stop_matcher.h"

namespace frank::server {
namespace {

using nlohmann::json;

json token_logprob(const ServerContext& ctx, bool as_ids, int32_t id, float logprob) {
  const std::string& bytes = ctx.tokenizer.token_bytes(id);
  return {{"token", ctx.token_name(id, as_ids)},
          {"logprob", logprob},
          {"bytes", std::vector<int>(bytes.begin(), bytes.end())}};
}

class ChatWriter : public OpenAiWriter {
 public:
  ChatWriter(const ServerContext& ctx, const json& body, bool thinking)
      : OpenAiWriter(ctx, body, "chatcmpl"), detok_(ctx.tokenizer), stops_(RequestFields(body).strings("stop", 4)),
        parser_(model::ChatParserOptions{thinking, "call_" + id_.substr(id_.size() - 8) + "_"}) {
    logprobs_ = RequestFields(body).get<bool>("logprobs", false);
    tokens_as_ids_ = RequestFields(body).get<bool>("return_tokens_as_token_ids", false);
  }

  std::string on_token(const TokenEvent& t) override {
    if (stops_.stopped()) return {};
    std::string out = role_chunk();
    if (logprobs_) {
      json entry = token_logprob(ctx_, tokens_as_ids_, t.id, t.logprob);
      entry["top_logprobs"] = json::array();
      for (auto [id, lp] : t.top_logprobs) entry["top_logprobs"].push_back(token_logprob(ctx_, tokens_as_ids_, id, lp));
      pending_logprobs_.push_back(entry);
      all_logprobs_.push_back(std::move(entry));
    }
    return out + relay(parse(stops_.push(detok_.push(t.id)), false));
  }

  std::string on_end(const JobEnd& end) override {
    if (end.finish_reason == "error") return failure(end);
    std::string out = role_chunk();
    if (!stops_.stopped()) out += relay(parse(stops_.push(detok_.flush()) + stops_.flush(), true));
    else out += relay(parse("", true));
    const auto& m = parser_.message();
    const std::string reason = !m.tool_calls.empty() ? "tool_calls" : stops_.stopped() ? "stop" : end.finish_reason;
    if (!stream_) {
      json message{{"role", "assistant"}, {"content", m.content + raw_content_}};
      if (!m.reasoning_content.empty()) message["reasoning_content"] = m.reasoning_content;
      if (!m.tool_calls.empty()) {
        message["tool_calls"] = json::array();
        for (const auto& c : m.tool_calls)
          message["tool_calls"].push_back(
              {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      }
      return reply("chat.completion",
                   {{"index", 0}, {"message", message}, {"finish_reason", reason},
                    {"logprobs", logprobs_ ? json{{"content", all_logprobs_}} : json()}},
                   end);
    }
    out += sse_event(envelope("chat.completion.chunk",
                              json::array({{{"index", 0}, {"delta", json::object()}, {"logprobs", json()},
                                            {"finish_reason", reason}}})));
    return out + stream_end("chat.completion.chunk", end);
  }

  bool satisfied() const override { return stops_.stopped(); }

 private:
  // Parses generated text; markup the model got wrong ends parsing, and from there on the text is
  // passed on as plain content (and the problem is logged), so a client still gets the output.
  std::vector<model::ChatEvent> parse(const std::string& text, bool at_end) {
    if (raw_) return text.empty() ? std::vector<model::ChatEvent>{} : raw(text);
    try {
      auto events = parser_.feed(text);
      if (at_end) {
        auto tail = parser_.finish();
        events.insert(events.end(), tail.begin(), tail.end());
      }
      return events;
    } catch (const Error& e) {
      std::cerr << "chat: generated markup does not parse, passing the rest on as content: " << e.what() << "\n";
      raw_ = true;
      return raw(text);
    }
  }
  std::vector<model::ChatEvent> raw(const std::string& text) {
    raw_content_ += text;
    return {model::ChatEvent{model::ChatEvent::Kind::ContentDelta, text, 0, {}}};
  }

  // OpenAI chunks for parser events (streaming only; a non-streaming reply is built at the end).
  std::string relay(const std::vector<model::ChatEvent>& events) {
    if (!stream_) return {};
    std::string out;
    using K = model::ChatEvent::Kind;
    for (const auto& e : events) {
      json delta;
      switch (e.kind) {
        case K::ReasoningDelta: delta = {{"reasoning_content", e.text}}; break;
        case K::ContentDelta: delta = {{"content", e.text}}; break;
        case K::ToolCallBegin:
          delta = {{"tool_calls", json::array({{{"index", e.call_index},
                                                {"id", e.call.id},
                                                {"type", "function"},
                                                {"function", {{"name", e.call.name}, {"arguments", ""}}}}})}};
          break;
        case K::ToolCallArgumentsDelta:
          delta = {{"tool_calls", json::array({{{"index", e.call_index}, {"function", {{"arguments", e.text}}}}})}};
          break;
        case K::ToolCallEnd: continue;
      }
      out += delta_chunk(std::move(delta));
    }
    if (logprobs_ && !pending_logprobs_.empty() && out.empty()) out += delta_chunk(json::object());
    return out;
  }
  std::string delta_chunk(json delta) {
    json lp = json();
    if (logprobs_ && !pending_logprobs_.empty()) {
      lp = {{"content", pending_logprobs_}};
      pending_logprobs_ = json::array();
    }
    return sse_event(envelope("chat.completion.chunk",
                    json::array({{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", lp},
                                  {"finish_reason", json()}}})));
  }
  std::string role_chunk() {
    if (!stream_ || role_sent_) return {};
    role_sent_ = true;
    return delta_chunk({{"role", "assistant"}, {"content", ""}});
  }

  model::StreamingDetokenizer detok_;
  StopMatcher stops_;
  model::ChatStreamParser parser_;
  bool logprobs_ = false, tokens_as_ids_ = false, role_sent_ = false, raw_ = false;
  std::string raw_content_;
  json pending_logprobs_ = json::array(), all_logprobs_ = json::array();
};

// The next turn of a conversation repeats this prompt up to its last <｜Assistant｜> token and then
// differs (its earlier assistant turns are re-encoded without their thinking), so the prefix cache
// checkpoints right after that token and at the start of the last user message.
std::vector<int64_t> message_boundaries(const model::Tokenizer& tok, const std::vector<int32_t>& prompt) {
  std::vector<int64_t> out;
  auto last = [&](std::string_view marker) -> std::optional<int64_t> {
    const auto id = tok.token_id(marker);
    const auto it = id ? std::find(prompt.rbegin(), prompt.rend(), *id) : prompt.rend();
    if (it == prompt.rend()) return std::nullopt;
    return prompt.rend() - it - 1;
  };
  if (auto user = last(model::markup::kUser)) out.push_back(*user);
  if (auto assistant = last(model::markup::kAssistant)) out.push_back(*assistant + 1);
  return out;
}

}  // namespace

void handle_chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const auto ordered = parse_body<nlohmann::ordered_json>(req.body);
  model::ChatRequest chat;
  try {
    chat = model::parse_chat_request(ordered);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "messages");
  }
  const json body = json::parse(json_text(ordered));
  const RequestFields f(body);
  GenerationRequest g = ctx.generation_fields(body, ctx.tokenizer.encode(model::encode_chat(chat)));
  if (f.get<bool>("logprobs", false)) g.top_logprobs = f.get_in_range<int>("top_logprobs", 0, 0, ctx.options.max_logprobs);
  g.message_boundaries = message_boundaries(ctx.tokenizer, g.prompt);
  auto writer = std::make_shared<ChatWriter>(ctx, body, chat.thinking);
  const char* type = writer->content_type();
  relay_job(res, type, ctx.submit(std::move(g)), writer, ctx.options.heartbeat);
}

}  // namespace frank::server
