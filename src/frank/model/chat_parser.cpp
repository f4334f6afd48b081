#include "frank/model/chat_parser.h"

#include <fmt/format.h>

#include <array>
#include <optional>
#include <span>
#include <stdexcept>
#include <utility>

#include "frank/core/error.h"
#include "frank/model/chat_markup.h"
#include "frank/model/python_json.h"

namespace frank::model {
namespace {

namespace mk = markup;
using Markers = std::span<const std::string_view>;

constexpr std::string_view kNameStart = " name=\"";
constexpr std::string_view kStringTrue = "\" string=\"true\">";
constexpr std::string_view kStringFalse = "\" string=\"false\">";
// DeepSeek's parser ends a parameter at "/｜DSML｜parameter" and then wants the "<" before it.
constexpr std::string_view kBareParameterClose = "/｜DSML｜parameter";
constexpr std::string_view kLineEnd = ">\n";

// Special tokens cannot be plain text; the tool-call block may only follow the reasoning.
constexpr std::array<std::string_view, 6> kReasoningMarkers{mk::kThinkEnd, mk::kToolCallsStart, mk::kBos,
                                                            mk::kEos,      mk::kThinkStart,     mk::kDsml};
constexpr std::array<std::string_view, 6> kContentMarkers{mk::kEos,        mk::kToolCallsStart, mk::kBos,
                                                          mk::kThinkStart, mk::kThinkEnd,       mk::kDsml};
constexpr std::array<std::string_view, 2> kInvokeOrBlockEnd{mk::kInvokeOpen, mk::kToolCallsEnd};
constexpr std::array<std::string_view, 2> kParameterOrInvokeEnd{mk::kParameterOpen, mk::kInvokeClose};
constexpr std::array<std::string_view, 3> kParameterNameEnd{kStringTrue, kStringFalse, kBareParameterClose};
constexpr std::array<std::string_view, 2> kParameterValueEnd{mk::kParameterClose, kBareParameterClose};
constexpr std::array<std::string_view, 1> kEosOnly{mk::kEos};

struct Found {
  size_t pos;
  std::string_view marker;
  bool partial;  // the text ends inside the marker; more text decides
};

// The first place where one of the markers starts in the text. Unless the text is final, a marker
// cut off by the end of the text counts: nothing at or after it may be read as plain text yet.
std::optional<Found> find_first(std::string_view text, Markers markers, bool at_end) {
  for (size_t pos = 0; pos < text.size(); ++pos) {
    const std::string_view rest = text.substr(pos);
    for (const std::string_view m : markers)
      if (rest.starts_with(m)) return Found{pos, m, false};
    if (!at_end)
      for (const std::string_view m : markers)
        if (m.starts_with(rest)) return Found{pos, m, true};
  }
  return std::nullopt;
}

// How far text[from..] holds whole UTF-8 characters (from is a character boundary). A character cut
// off at the end waits for more bytes; `invalid` says a byte there can never be UTF-8.
struct Utf8Scan {
  size_t end;
  bool invalid;
};

Utf8Scan scan_utf8(std::string_view text, size_t from) {
  size_t i = from;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t length = 1;
    unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
    if (lead < 0x80) {
      ++i;
      continue;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;   // no overlong forms
      if (lead == 0xED) high = 0x9F;  // no surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
    } else {
      return {i, true};
    }
    for (size_t k = 1; k < length; ++k) {
      if (i + k == text.size()) return {i, false};
      const auto byte = static_cast<unsigned char>(text[i + k]);
      if (byte < (k == 1 ? low : 0x80) || byte > (k == 1 ? high : 0xBF)) return {i, true};
    }
    i += length;
  }
  return {i, false};
}

// Where a and b first differ (or the shorter one ends).
size_t common_prefix(std::string_view a, std::string_view b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

// The reference reads an invoke header with ^\s*name="(.*?)">\n$, whose $ also matches before a
// final "\n": a call without parameters is written with one more newline.
std::optional<std::string> invoke_name(std::string_view header) {
  const auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); };
  while (!header.empty() && is_space(header.front())) header.remove_prefix(1);
  if (!header.starts_with("name=\"")) return std::nullopt;
  header.remove_prefix(6);
  for (const std::string_view end : {std::string_view("\">\n\n"), std::string_view("\">\n")})
    if (header.ends_with(end)) return std::string(header.substr(0, header.size() - end.size()));
  return std::nullopt;
}

// Markup in an error message: quoted, newlines visible, long text cut at a character boundary.
std::string shown(std::string_view markup) {
  constexpr size_t kMax = 60;
  if (markup.size() <= kMax) return python_json_string(markup);
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(markup[cut]) & 0xC0) == 0x80) --cut;
  return python_json_string(markup.substr(0, cut)) + "...";
}

}  // namespace

ChatStreamParser::ChatStreamParser(ChatParserOptions options)
    : options_(std::move(options)), state_(options_.thinking ? State::Reasoning : State::Content) {}

std::vector<ChatEvent> ChatStreamParser::feed(std::string_view text) {
  if (failed_) throw Error("chat parser: used after an error");
  buffer_ += text;
  const Utf8Scan utf8 = scan_utf8(buffer_, checked_utf8_);
  checked_utf8_ = utf8.end;
  while (step(false)) {
  }
  // Everything before the bad byte is read first: an error there is the one to report, whatever
  // pieces the text came in.
  if (utf8.invalid) fail("the text is not valid UTF-8", consumed_ + checked_utf8_);
  return std::exchange(events_, {});
}

std::vector<ChatEvent> ChatStreamParser::finish() {
  if (failed_) throw Error("chat parser: used after an error");
  while (step(true)) {
  }
  const bool in_block =
      state_ != State::Reasoning && state_ != State::Content && state_ != State::AfterBlock && state_ != State::Done;
  if (in_block) fail("the text ends inside the tool-call block");
  if (checked_utf8_ != buffer_.size()) fail("the text ends inside a UTF-8 character", consumed_ + checked_utf8_);
  if (!buffer_.empty()) fail("text after the tool-call block");  // a cut-off EOS token
  state_ = State::Done;
  return std::exchange(events_, {});
}

bool ChatStreamParser::step(bool at_end) {
  switch (state_) {
    case State::Reasoning: return stream_text(ChatEvent::Kind::ReasoningDelta, at_end);
    case State::Content: return stream_text(ChatEvent::Kind::ContentDelta, at_end);
    case State::ParameterNameStart: return read_parameter_name_start();
    case State::ParameterValue: return read_parameter_value();
    case State::Done:
      if (checked_utf8_ > 0) fail("text after the end-of-sentence token");
      return false;
    default: return read_segment();
  }
}

bool ChatStreamParser::stream_text(ChatEvent::Kind kind, bool at_end) {
  const bool reasoning = kind == ChatEvent::Kind::ReasoningDelta;
  const std::string_view available(buffer_.data(), checked_utf8_);
  const auto found = find_first(available, reasoning ? Markers(kReasoningMarkers) : Markers(kContentMarkers), at_end);
  const size_t plain = found ? found->pos : available.size();
  emit_delta(kind, available.substr(0, plain));
  consume(plain);
  if (!found || found->partial) return false;
  consume(found->marker.size());
  if (reasoning && found->marker == mk::kThinkEnd) {
    state_ = State::Content;
  } else if (!reasoning && found->marker == mk::kEos) {
    state_ = State::Done;
  } else if (!reasoning && found->marker == mk::kToolCallsStart) {
    state_ = State::BlockOpen;
    segment_.clear();
  } else if (found->marker == mk::kToolCallsStart) {
    fail("a tool-call block inside the reasoning (before </think>)");
  } else {
    fail(fmt::format("{} inside the {}", shown(found->marker), reasoning ? "reasoning" : "content"));
  }
  return true;
}

// Markup between two tags: collected until the next tag, then checked as a whole, as DeepSeek's
// parser does. Fixed markup (">\n") is also checked while it arrives, to fail early. A tag cut off
// by the end of the text stays unread, and finish() reports the unfinished block.
bool ChatStreamParser::read_segment() {
  Markers markers;
  std::optional<std::string_view> fixed;
  switch (state_) {
    case State::BlockOpen:
      markers = kInvokeOrBlockEnd;
      fixed = kLineEnd;
      break;
    case State::InvokeHeader: markers = kParameterOrInvokeEnd; break;
    case State::ParameterName: markers = kParameterNameEnd; break;
    case State::AfterParameter:
      markers = kParameterOrInvokeEnd;
      fixed = kLineEnd;
      break;
    case State::AfterInvoke:
      markers = kInvokeOrBlockEnd;
      fixed = kLineEnd;
      break;
    case State::AfterBlock:
      markers = kEosOnly;
      fixed = "";
      break;
    default: throw std::logic_error("chat parser: read_segment in a text state");
  }
  const std::string_view available(buffer_.data(), checked_utf8_);
  const auto found = find_first(available, markers, false);
  const size_t length = found ? found->pos : available.size();
  segment_.append(available.substr(0, length));
  consume(length);
  if (fixed && !fixed->starts_with(segment_)) {
    const size_t at = consumed_ - (segment_.size() - common_prefix(segment_, *fixed));
    fail(state_ == State::AfterBlock ? "text after the tool-call block" : fmt::format("expected {}", shown(*fixed)), at);
  }
  if (!found || found->partial) return false;
  consume(found->marker.size());
  if (fixed && segment_ != *fixed) fail(fmt::format("expected {} before {}", shown(*fixed), shown(found->marker)));
  on_segment_end(found->marker);
  segment_.clear();
  return true;
}

void ChatStreamParser::on_segment_end(std::string_view marker) {
  switch (state_) {
    case State::BlockOpen: state_ = marker == mk::kInvokeOpen ? State::InvokeHeader : State::AfterBlock; break;
    case State::InvokeHeader: {
      const auto name = invoke_name(segment_);
      if (!name) fail(fmt::format("bad invoke header {}", shown(segment_)));
      if (name->empty()) fail("a tool call with an empty name");
      call_ = ParsedToolCall{options_.call_id_prefix + std::to_string(message_.tool_calls.size()), *name, ""};
      parameter_names_.clear();
      events_.push_back({ChatEvent::Kind::ToolCallBegin, "", message_.tool_calls.size(), call_});
      state_ = marker == mk::kParameterOpen ? State::ParameterNameStart : State::AfterInvoke;
      break;
    }
    case State::ParameterName:
      if (marker == kBareParameterClose) fail(fmt::format("parameter {} has no string=\"true|false\"", shown(segment_)));
      begin_parameter(marker == kStringTrue);
      break;
    case State::AfterParameter:
      state_ = marker == mk::kParameterOpen ? State::ParameterNameStart : State::AfterInvoke;
      break;
    case State::AfterInvoke:
      end_call();
      state_ = marker == mk::kInvokeOpen ? State::InvokeHeader : State::AfterBlock;
      break;
    case State::AfterBlock: state_ = State::Done; break;
    default: throw std::logic_error("chat parser: on_segment_end in a text state");
  }
}

bool ChatStreamParser::read_parameter_name_start() {
  const std::string_view available(buffer_.data(), checked_utf8_);
  const std::string_view start = available.substr(0, kNameStart.size());
  if (!kNameStart.starts_with(start))
    fail(fmt::format("expected {} after <｜DSML｜parameter", shown(kNameStart)), consumed_ + common_prefix(start, kNameStart));
  if (start.size() < kNameStart.size()) return false;  // at the end, finish() reports the cut-off block
  consume(kNameStart.size());
  segment_.clear();
  state_ = State::ParameterName;
  return true;
}

void ChatStreamParser::begin_parameter(bool is_string) {
  parameter_name_ = segment_;
  if (!parameter_names_.insert(parameter_name_).second)
    fail(fmt::format("parameter {} given twice in one call", shown(parameter_name_)));
  parameter_is_string_ = is_string;
  raw_value_.clear();
  // A string value is streamed as it comes: any text is a valid JSON string once escaped.
  if (is_string)
    emit_delta(ChatEvent::Kind::ToolCallArgumentsDelta,
               (parameter_names_.size() == 1 ? "{" : ", ") + python_json_string(parameter_name_) + ": \"");
  state_ = State::ParameterValue;
}

bool ChatStreamParser::read_parameter_value() {
  const std::string_view available(buffer_.data(), checked_utf8_);
  const auto found = find_first(available, kParameterValueEnd, false);
  const std::string_view value = available.substr(0, found ? found->pos : available.size());
  if (parameter_is_string_)
    emit_delta(ChatEvent::Kind::ToolCallArgumentsDelta, python_json_string_body(value));
  else
    raw_value_.append(value);
  consume(value.size());
  if (!found || found->partial) return false;
  if (found->marker == kBareParameterClose) fail("\"/｜DSML｜parameter\" without the \"<\" before it");
  consume(found->marker.size());
  end_parameter();
  segment_.clear();
  state_ = State::AfterParameter;
  return true;
}

// DeepSeek's parser copies a string="false" value into the arguments as it is; frank first checks
// that it is JSON that encode_chat can take back, so that no call carries arguments that do not
// parse, and every parsed call can go into the next request's history.
void ChatStreamParser::end_parameter() {
  if (parameter_is_string_) {
    emit_delta(ChatEvent::Kind::ToolCallArgumentsDelta, "\"");
    return;
  }
  try {
    (void)parse_json_exact(raw_value_);
  } catch (const std::exception&) {
    fail(fmt::format("the value of parameter {} is not JSON: {}", shown(parameter_name_), shown(raw_value_)));
  }
  emit_delta(ChatEvent::Kind::ToolCallArgumentsDelta,
             (parameter_names_.size() == 1 ? "{" : ", ") + python_json_string(parameter_name_) + ": " + raw_value_);
}

void ChatStreamParser::end_call() {
  emit_delta(ChatEvent::Kind::ToolCallArgumentsDelta, parameter_names_.empty() ? "{}" : "}");
  const size_t index = message_.tool_calls.size();
  message_.tool_calls.push_back(call_);
  events_.push_back({ChatEvent::Kind::ToolCallEnd, "", index, call_});
}

void ChatStreamParser::emit_delta(ChatEvent::Kind kind, std::string_view text) {
  if (text.empty()) return;
  const size_t index = message_.tool_calls.size();
  switch (kind) {
    case ChatEvent::Kind::ReasoningDelta: message_.reasoning_content.append(text); break;
    case ChatEvent::Kind::ContentDelta: message_.content.append(text); break;
    default: call_.arguments.append(text); break;
  }
  if (!events_.empty() && events_.back().kind == kind && events_.back().call_index == index)
    events_.back().text.append(text);
  else
    events_.push_back({kind, std::string(text), index, {}});
}

void ChatStreamParser::consume(size_t bytes) {
  buffer_.erase(0, bytes);
  checked_utf8_ -= bytes;
  consumed_ += bytes;
}

void ChatStreamParser::fail(const std::string& problem) { fail(problem, consumed_); }

void ChatStreamParser::fail(const std::string& problem, size_t at) {
  failed_ = true;
  throw Error(fmt::format("chat parser: {} (at byte {} of the generated text)", problem, at));
}

ParsedMessage parse_chat_completion(std::string_view text, const ChatParserOptions& options) {
  ChatStreamParser parser(options);
  parser.feed(text);
  parser.finish();
  return parser.message();
}

nlohmann::ordered_json to_openai_message(const ParsedMessage& message) {
  nlohmann::ordered_json out = {{"role", "assistant"}, {"content", message.content}};
  if (!message.reasoning_content.empty()) out["reasoning_content"] = message.reasoning_content;
  if (message.tool_calls.empty()) return out;
  auto& calls = out["tool_calls"] = nlohmann::ordered_json::array();
  for (const ParsedToolCall& call : message.tool_calls)
    calls.push_back({{"id", call.id},
                     {"type", "function"},
                     {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  return out;
}

}  // namespace frank::model
