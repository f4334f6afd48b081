#include "frank/server/completions.h"

#include "frank/core/error.h"
#include "frank/server/api_error.h"
#include "frank/server/openai_writer.h"
#include "frank/server/request_fields.h"
#include "frank/server/stop_matcher.h"

namespace frank::server {
namespace {

using nlohmann::json;

// The prompt: text (tokenized with BOS, as HF tokenizers' add_special_tokens does), token ids, or a
// one-element list of either (OpenAI allows batches; frank serves one prompt per request).
// `text` gets the prompt as text: as given, or the decoded ids.
std::vector<int32_t> prompt_ids(const ServerContext& ctx, const json& body, std::string& text) {
  const RequestFields f(body);
  if (!f.has("prompt")) throw ApiError(400, "'prompt' is required", "prompt");
  json prompt = f.raw("prompt");
  if (prompt.is_array() && prompt.size() == 1 && (prompt[0].is_string() || prompt[0].is_array())) prompt = prompt[0];
  if (prompt.is_string()) {
    try {
      text = prompt.get<std::string>();
      return ctx.tokenizer.encode(text, /*add_bos=*/true);
    } catch (const Error& e) {
      throw ApiError(400, e.what(), "prompt");
    }
  }
  const json wrapped{{"prompt", prompt}};
  auto ids = RequestFields(wrapped).token_ids("prompt", ctx.model.config().vocab_size);
  text = ctx.tokenizer.decode(ids);
  return ids;
}

// OpenAI's legacy logprobs object for a run of tokens.
struct LegacyLogprobs {
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       text_offset = json::array();
  void add(const ServerContext& ctx, bool as_ids, const TokenEvent& e, size_t offset, bool with_value) {
    tokens.push_back(ctx.token_name(e.id, as_ids));
    token_logprobs.push_back(with_value ? json(e.logprob) : json());
    json top = json::object();
    for (auto [id, lp] : e.top_logprobs) top[ctx.token_name(id, as_ids)] = lp;
    top_logprobs.push_back(with_value ? top : json());
    text_offset.push_back(offset);
  }
  json to_json() const {
    return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs},
            {"text_offset", text_offset}};
  }
};

class CompletionWriter : public OpenAiWriter {
 public:
  CompletionWriter(const ServerContext& ctx, const json& body, const std::vector<int32_t>& prompt,
                   const std::string& prompt_text)
      : OpenAiWriter(ctx, body, "cmpl"), detok_(ctx.tokenizer), stops_(RequestFields(body).strings("stop", 4)) {
    const RequestFields f(body);
    logprobs_ = f.has("logprobs");
    tokens_as_ids_ = f.get<bool>("return_tokens_as_token_ids", false);
    if (f.get<bool>("echo", false)) {
      echo_ = prompt_text;
      // Prompt tokens carry no logprob of their own here (the first has none by definition). Their
      // text offsets point into the echoed text; a BOS that frank added to a text prompt is not
      // part of that text, so it sits at offset 0 and takes no room.
      const json& given = f.raw("prompt");
      const bool added_bos = given.is_string() || (given.is_array() && !given.empty() && given[0].is_string());
      if (logprobs_)
        for (size_t i = 0; i < prompt.size(); ++i) {
          logprobs_json_.add(ctx, tokens_as_ids_, TokenEvent{prompt[i], 0.0f, {}}, text_.size(), false);
          if (!(added_bos && i == 0)) text_ += ctx.tokenizer.decode(std::span<const int32_t>(&prompt[i], 1));
        }
      text_ = echo_;
    }
  }

  std::string on_token(const TokenEvent& t) override {
    if (stops_.stopped()) return {};
    // The end-of-sequence token ends the text; it is not part of it.
    const std::string piece = t.id == ctx_.model.config().eos_token_id ? "" : stops_.push(detok_.push(t.id));
    if (logprobs_) logprobs_json_.add(ctx_, tokens_as_ids_, t, text_.size(), true);
    text_ += piece;
    if (!stream_) return {};
    std::string out = echo_sent_ ? "" : chunk(echo_, json());
    echo_sent_ = true;
    json lp = logprobs_ ? logprobs_json_.to_json() : json();
    if (logprobs_) logprobs_json_ = LegacyLogprobs{};
    return out + (piece.empty() && !logprobs_ ? "" : chunk(piece, lp));
  }

  std::string on_end(const JobEnd& end) override {
    if (end.finish_reason == "error") return failure(end);
    const std::string tail = stops_.stopped() ? "" : stops_.push(detok_.flush()) + stops_.flush();
    text_ += tail;
    const std::string reason = stops_.stopped() ? "stop" : end.finish_reason;
    if (!stream_)
      return reply("text_completion",
                   {{"index", 0}, {"text", text_}, {"finish_reason", reason},
                    {"logprobs", logprobs_ ? logprobs_json_.to_json() : json()}},
                   end);
    std::string out = echo_sent_ ? "" : chunk(echo_, json());
    return out + chunk(tail, json(), reason) + stream_end("text_completion", end);
  }

  bool satisfied() const override { return stops_.stopped(); }

 private:
  std::string chunk(const std::string& text, json logprobs, const std::string& finish = "") {
    json choice{{"index", 0}, {"text", text}, {"logprobs", std::move(logprobs)},
                {"finish_reason", finish.empty() ? json() : json(finish)}};
    return sse_event(envelope("text_completion", json::array({choice})));
  }

  model::StreamingDetokenizer detok_;
  StopMatcher stops_;
  bool logprobs_ = false, tokens_as_ids_ = false, echo_sent_ = false;
  std::string echo_, text_;
  LegacyLogprobs logprobs_json_;
};

}  // namespace

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const RequestFields f(body);
  std::string prompt_text;
  GenerationRequest g = ctx.generation_fields(body, prompt_ids(ctx, body, prompt_text));
  if (f.has("logprobs")) g.top_logprobs = f.get_in_range<int>("logprobs", 0, 0, ctx.options.max_logprobs);
  auto writer = std::make_shared<CompletionWriter>(ctx, body, g.prompt, prompt_text);
  const char* type = writer->content_type();
  relay_job(res, type, ctx.submit(std::move(g)), writer, ctx.options.heartbeat);
}

}  // namespace frank::server
