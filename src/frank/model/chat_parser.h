#pragma once
// Generated DeepSeek-V4 text -> OpenAI-style reasoning_content, content and tool_calls, as DeepSeek's
// reference parser (parse_message_from_completion_text in encoding_dsv4.py) reads it, fed whole or
// as a stream of text deltas.
//
// The text is what the model generates after the prompt: in thinking mode the reasoning, "</think>",
// then the content; then optionally one DSML tool-call block; then optionally the EOS token's text.
// The stream may also just stop (finish()): a stop inside the reasoning or the content is a
// truncated answer, a stop inside the tool-call block is an error.
//
// Malformed markup is reported as frank::Error, never passed on as content: DeepSeek's special
// tokens (BOS, EOS, <think>, </think>, ｜DSML｜) cannot appear in plain text, and DSML that does not
// parse means the model went wrong. Of text that ends with EOS, what the reference parser rejects,
// this parser rejects too; it also rejects what the reference would pass on as a broken call: a
// string="false" value that is not JSON, an empty tool name, text that is not UTF-8 (docs/chat.md).
//
// Streaming guarantees: every split of the same text gives the same final message and the same
// error; a tool call is reported complete (ToolCallEnd) only after its closing tag, with arguments
// that are a valid JSON object; the argument deltas of a call concatenate to its final arguments;
// every delta is whole UTF-8 characters. Deltas of a call that never ends (because an error
// follows) must be discarded by the consumer.
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace frank::model {

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object, written as DeepSeek's parser writes it
};

struct ParsedMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
};

struct ChatParserOptions {
  bool thinking = true;                  // the prompt ended with <think> (thinking mode)
  std::string call_id_prefix = "call_";  // tool call k gets the id prefix + k
};

struct ChatEvent {
  enum class Kind { ReasoningDelta, ContentDelta, ToolCallBegin, ToolCallArgumentsDelta, ToolCallEnd };
  Kind kind;
  std::string text;       // the delta of ReasoningDelta, ContentDelta and ToolCallArgumentsDelta
  size_t call_index = 0;  // the tool-call events
  ParsedToolCall call;    // ToolCallBegin: id and name; ToolCallEnd: the complete call
};

class ChatStreamParser {
 public:
  explicit ChatStreamParser(ChatParserOptions options = {});

  // Both throw frank::Error on malformed text; the parser is unusable afterwards.
  std::vector<ChatEvent> feed(std::string_view text);
  std::vector<ChatEvent> finish();  // the model stopped; also flushes text held back at the end

  const ParsedMessage& message() const { return message_; }  // what has been reported so far

 private:
  enum class State {
    Reasoning,
    Content,
    BlockOpen,           // after "\n\n<｜DSML｜tool_calls": ">\n", then an invoke or the block's end
    InvokeHeader,        // after "<｜DSML｜invoke": ' name="NAME">\n'
    ParameterNameStart,  // after "<｜DSML｜parameter": ' name="'
    ParameterName,       // the name, up to '" string="true">' or '" string="false">'
    ParameterValue,      // up to "</｜DSML｜parameter"
    AfterParameter,      // ">\n", then a parameter or the invoke's end
    AfterInvoke,         // ">\n", then an invoke or the block's end
    AfterBlock,          // nothing, or the EOS token
    Done,                // after the EOS token: nothing more may come
  };

  bool step(bool at_end);
  bool stream_text(ChatEvent::Kind kind, bool at_end);
  bool read_segment();
  bool read_parameter_name_start();
  bool read_parameter_value();
  void on_segment_end(std::string_view marker);
  void begin_parameter(bool is_string);
  void end_parameter();
  void end_call();
  void emit_delta(ChatEvent::Kind kind, std::string_view text);
  void consume(size_t bytes);
  [[noreturn]] void fail(const std::string& problem);  // at the byte consumed last
  [[noreturn]] void fail(const std::string& problem, size_t at);

  ChatParserOptions options_;
  State state_;
  std::string buffer_;        // text received but not yet consumed
  size_t checked_utf8_ = 0;   // leading bytes of buffer_ known to be whole UTF-8 characters
  size_t consumed_ = 0;       // bytes consumed since the start, for error messages
  std::string segment_;       // markup read so far in the current segment state
  bool failed_ = false;
  std::vector<ChatEvent> events_;
  ParsedMessage message_;

  // The call being read.
  ParsedToolCall call_;
  std::set<std::string> parameter_names_;
  bool parameter_is_string_ = false;
  std::string parameter_name_;
  std::string raw_value_;  // a string="false" value, checked as JSON when it ends
};

// The whole text at once: feed(text) then finish().
ParsedMessage parse_chat_completion(std::string_view text, const ChatParserOptions& options = {});

// {"role": "assistant", "content", "reasoning_content" (when not empty), "tool_calls" (when any)}
nlohmann::ordered_json to_openai_message(const ParsedMessage& message);

}  // namespace frank::model
