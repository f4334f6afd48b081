// DeepSeek-V4 chat encoding and tool-call parsing against DeepSeek's reference encoder
// (fixtures from tools/reference/make_chat_fixtures.py): exact prompts for every conversation, the
// original calls back from every encoded assistant turn, and a streaming parser that gives the same
// message for every way the text is cut and never reports a malformed call.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>

#include "chat_fixture.h"
#include "frank/model/chat_encoding.h"
#include "frank/model/chat_parser.h"
#include "unit/tokenizer_test_util.h"

namespace frank::test {
namespace {

using model::ChatEvent;
using model::ChatParserOptions;
using model::ChatStreamParser;
using model::ParsedMessage;
using Json = nlohmann::ordered_json;

std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return fmt::format("first difference at byte {}:\n got: {}\nwant: {}", i, Json(got.substr(i, 80)).dump(),
                     Json(want.substr(i, 80)).dump());
}

bool whole_utf8(std::string_view text) {
  try {
    (void)Json(std::string(text)).dump();  // dump() throws on bytes that are not UTF-8
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

ChatParserOptions options_for(const std::string& thinking_mode) {
  ChatParserOptions options;
  options.thinking = thinking_mode == "thinking";
  return options;
}

// What a parse ends in: the message, or the error's text.
struct Outcome {
  bool ok = false;
  ParsedMessage message;
  std::string error;
};

bool same(const Outcome& a, const Outcome& b) {
  if (a.ok != b.ok) return false;
  if (!a.ok) return a.error == b.error;
  const auto& x = a.message;
  const auto& y = b.message;
  if (x.content != y.content || x.reasoning_content != y.reasoning_content || x.tool_calls.size() != y.tool_calls.size())
    return false;
  for (size_t i = 0; i < x.tool_calls.size(); ++i)
    if (x.tool_calls[i].id != y.tool_calls[i].id || x.tool_calls[i].name != y.tool_calls[i].name ||
        x.tool_calls[i].arguments != y.tool_calls[i].arguments)
      return false;
  return true;
}

std::string describe(const Outcome& o) {
  return o.ok ? model::to_openai_message(o.message).dump() : "error: " + o.error;
}

// Checks the events as they arrive: a call begins once, its argument deltas add up to the
// arguments it ends with, those are a JSON object, and every delta is whole UTF-8 characters.
class EventLog {
 public:
  explicit EventLog(std::string context) : context_(std::move(context)) {}

  void add(const std::vector<ChatEvent>& events) {
    for (const ChatEvent& e : events) {
      if (!whole_utf8(e.text)) ADD_FAILURE() << context_ << ": a delta that is not whole UTF-8";
      switch (e.kind) {
        case ChatEvent::Kind::ReasoningDelta: reasoning_ += e.text; break;
        case ChatEvent::Kind::ContentDelta: content_ += e.text; break;
        case ChatEvent::Kind::ToolCallBegin:
          if (e.call_index != calls_.size() || e.call.name.empty())
            ADD_FAILURE() << context_ << ": call " << e.call_index << " begins out of order or without a name";
          calls_.push_back({e.call.id, e.call.name, ""});
          open_ = true;
          break;
        case ChatEvent::Kind::ToolCallArgumentsDelta:
          if (!open_ || e.call_index + 1 != calls_.size())
            ADD_FAILURE() << context_ << ": arguments for a call that is not open";
          else
            calls_.back().arguments += e.text;
          break;
        case ChatEvent::Kind::ToolCallEnd: check_end(e); break;
      }
    }
  }

  void check_final(const ParsedMessage& message) const {
    EXPECT_FALSE(open_) << context_ << ": a call was left open";
    EXPECT_EQ(reasoning_, message.reasoning_content) << context_;
    EXPECT_EQ(content_, message.content) << context_;
    EXPECT_EQ(calls_.size(), message.tool_calls.size()) << context_;
  }

 private:
  void check_end(const ChatEvent& e) {
    if (!open_ || e.call_index + 1 != calls_.size()) {
      ADD_FAILURE() << context_ << ": a call ends that is not open";
      return;
    }
    open_ = false;
    EXPECT_EQ(e.call.arguments, calls_.back().arguments) << context_ << ": the deltas do not add up";
    EXPECT_EQ(e.call.name, calls_.back().name) << context_;
    EXPECT_EQ(e.call.id, calls_.back().id) << context_;
    try {
      EXPECT_TRUE(nlohmann::json::parse(e.call.arguments).is_object()) << context_ << ": " << e.call.arguments;
    } catch (const nlohmann::json::exception& error) {
      ADD_FAILURE() << context_ << ": a finished call with arguments that are not JSON: " << e.call.arguments << " ("
                    << error.what() << ")";
    }
  }

  std::string context_;
  std::string reasoning_, content_;
  std::vector<model::ParsedToolCall> calls_;
  bool open_ = false;
};

// Feeds the text cut at `cuts` (ascending), checking every event; then finish().
Outcome stream(std::string_view text, const std::vector<size_t>& cuts, const ChatParserOptions& options,
               const std::string& context) {
  ChatStreamParser parser(options);
  EventLog log(context);
  try {
    size_t start = 0;
    for (const size_t cut : cuts) {
      log.add(parser.feed(text.substr(start, cut - start)));
      start = cut;
    }
    log.add(parser.feed(text.substr(start)));
    log.add(parser.finish());
  } catch (const Error& e) {
    return {false, {}, e.what()};
  }
  log.check_final(parser.message());
  return {true, parser.message(), ""};
}

Outcome parse_whole(std::string_view text, const ChatParserOptions& options) {
  try {
    return {true, model::parse_chat_completion(text, options), ""};
  } catch (const Error& e) {
    return {false, {}, e.what()};
  }
}

// Every text the parser must read correctly: the encoded assistant turns and the parser cases
// that DeepSeek's parser accepts as well.
struct Sample {
  std::string name;
  std::string text;
  ChatParserOptions options;
};

std::vector<Sample> valid_samples() {
  std::vector<Sample> samples;
  for (const Json& c : chat_conversations())
    for (const Json& t : c["completions"])
      samples.push_back({fmt::format("{}[{}]", c["name"].get<std::string>(), t["message_index"].get<int>()),
                         t["text"], options_for(t["thinking_mode"])});
  for (const Json& c : chat_parser_cases())
    if (c["frank"] == "same" && !c["reference"].contains("error"))
      samples.push_back({c["name"], c["text"], options_for(c["thinking_mode"])});
  return samples;
}

TEST(ChatGolden, PromptsEqualDeepSeekEncoder) {
  const auto conversations = chat_conversations();
  ASSERT_GE(conversations.size(), 30u);
  for (const Json& c : conversations) {
    const std::string want = c["prompt"];
    const std::string got = model::encode_chat(c["request"]);
    EXPECT_TRUE(got == want) << c["name"] << ": " << first_difference(got, want);
  }
}

// The ids are HF tokenizers' encode(prompt): the BOS token comes from the prompt's text.
TEST(ChatGolden, PromptIdsEqualHfTokenizer) {
  for (const Json& c : chat_conversations()) {
    const auto ids = deepseek_tokenizer().encode(model::encode_chat(c["request"]));
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << c["name"];
  }
}

TEST(ChatGolden, EncodedAssistantTurnsParseBackToTheOriginalCalls) {
  size_t turns = 0, calls = 0;
  for (const Json& c : chat_conversations()) {
    for (const Json& t : c["completions"]) {
      const std::string name = fmt::format("{}[{}]", c["name"].get<std::string>(), t["message_index"].get<int>());
      const ParsedMessage got = model::parse_chat_completion(t["text"].get<std::string>(), options_for(t["thinking_mode"]));
      const Json& reference = t["reference"];
      const Json& original = t["original"];
      EXPECT_EQ(got.content, reference["content"]) << name;
      EXPECT_EQ(got.reasoning_content, reference["reasoning_content"]) << name;
      EXPECT_EQ(got.content, original["content"].is_null() ? "" : original["content"].get<std::string>()) << name;
      if (t["thinking_mode"] == "thinking") {
        EXPECT_EQ(got.reasoning_content, original.value("reasoning_content", "")) << name;
      }
      const Json original_calls = original.value("tool_calls", Json::array());
      ASSERT_EQ(got.tool_calls.size(), reference["tool_calls"].size()) << name;
      ASSERT_EQ(got.tool_calls.size(), original_calls.size()) << name;
      for (size_t i = 0; i < got.tool_calls.size(); ++i) {
        const auto& call = got.tool_calls[i];
        // Byte for byte what DeepSeek's parser writes, and the same JSON value the request gave.
        EXPECT_EQ(call.name, reference["tool_calls"][i]["function"]["name"]) << name;
        EXPECT_EQ(call.arguments, reference["tool_calls"][i]["function"]["arguments"]) << name;
        EXPECT_EQ(call.name, original_calls[i]["function"]["name"]) << name;
        EXPECT_EQ(nlohmann::json::parse(call.arguments),
                  nlohmann::json::parse(original_calls[i]["function"]["arguments"].get<std::string>()))
            << name << " call " << i;
        EXPECT_EQ(call.id, fmt::format("call_{}", i));
        ++calls;
      }
      ++turns;
    }
  }
  EXPECT_GE(turns, 20u);
  EXPECT_GE(calls, 15u);
}

TEST(ChatGolden, ParserCasesAgreeWithDeepSeekParser) {
  for (const Json& c : chat_parser_cases()) {
    const std::string name = c["name"];
    const Outcome got = parse_whole(c["text"].get<std::string>(), options_for(c["thinking_mode"]));
    const Json& reference = c["reference"];
    if (c["frank"] == "error" || reference.contains("error")) {
      EXPECT_FALSE(got.ok) << name << " should be rejected, got " << describe(got);
      continue;
    }
    ASSERT_TRUE(got.ok) << name << ": " << got.error;
    EXPECT_EQ(got.message.content, reference["content"]) << name;
    EXPECT_EQ(got.message.reasoning_content, reference["reasoning_content"]) << name;
    ASSERT_EQ(got.message.tool_calls.size(), reference["tool_calls"].size()) << name;
    for (size_t i = 0; i < got.message.tool_calls.size(); ++i) {
      EXPECT_EQ(got.message.tool_calls[i].name, reference["tool_calls"][i]["function"]["name"]) << name;
      EXPECT_EQ(got.message.tool_calls[i].arguments, reference["tool_calls"][i]["function"]["arguments"]) << name;
    }
  }
}

TEST(ChatGolden, StreamCutAnywhereGivesTheSameMessage) {
  for (const Sample& s : valid_samples()) {
    const Outcome whole = parse_whole(s.text, s.options);
    ASSERT_TRUE(whole.ok) << s.name << ": " << whole.error;
    for (size_t cut = 0; cut <= s.text.size(); ++cut) {
      const Outcome got = stream(s.text, {cut}, s.options, fmt::format("{} cut at {}", s.name, cut));
      ASSERT_TRUE(same(got, whole)) << s.name << " cut at " << cut << ": " << describe(got);
    }
    std::vector<size_t> every_byte(s.text.size());
    for (size_t i = 0; i < every_byte.size(); ++i) every_byte[i] = i;
    const Outcome bytewise = stream(s.text, every_byte, s.options, s.name + " byte by byte");
    EXPECT_TRUE(same(bytewise, whole)) << s.name << " byte by byte: " << describe(bytewise);
  }
}

std::vector<size_t> random_cuts(size_t length, std::mt19937& rng) {
  std::vector<size_t> cuts;
  const size_t n = std::uniform_int_distribution<size_t>(0, 12)(rng);
  for (size_t i = 0; i < n; ++i) cuts.push_back(std::uniform_int_distribution<size_t>(0, length)(rng));
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

TEST(ChatGolden, StreamCutAtRandomGivesTheSameMessage) {
  std::mt19937 rng(20260501);
  for (const Sample& s : valid_samples()) {
    const Outcome whole = parse_whole(s.text, s.options);
    for (int trial = 0; trial < 100; ++trial) {
      const auto cuts = random_cuts(s.text.size(), rng);
      const Outcome got = stream(s.text, cuts, s.options, s.name + " random cuts");
      ASSERT_TRUE(same(got, whole)) << s.name << " trial " << trial << ": " << describe(got);
    }
  }
}

// Truncated, corrupted and re-spliced completions: the parser must answer with a message whose
// calls are all well formed, or with frank::Error, and a stream of the same text must agree.
std::string mutate(std::string text, std::mt19937& rng) {
  static const std::vector<std::string> fragments = {
      "<｜end▁of▁sentence｜>", "<｜begin▁of▁sentence｜>", "</think>", "<think>", "｜DSML｜",
      "\n\n<｜DSML｜tool_calls>\n", "<｜DSML｜invoke name=\"f\">\n", "</｜DSML｜invoke>\n", "</｜DSML｜invoke",
      "<｜DSML｜parameter name=\"k\" string=\"true\">", "<｜DSML｜parameter name=\"n\" string=\"false\">",
      "</｜DSML｜parameter>\n", "/｜DSML｜parameter", "</｜DSML｜tool_calls>", ">\n", "\n", "\"", "{", "}", "[1,",
      "\xff", "\xe4\xb8", "\xed\xa0\x80", "𝄞", "\\", "<", "｜"};
  auto position = [&] { return std::uniform_int_distribution<size_t>(0, text.size())(rng); };
  const int edits = std::uniform_int_distribution<int>(1, 3)(rng);
  for (int i = 0; i < edits; ++i) {
    switch (std::uniform_int_distribution<int>(0, 4)(rng)) {
      case 0: text.resize(position()); break;
      case 1:
        if (!text.empty()) text[std::min(position(), text.size() - 1)] = static_cast<char>(rng() & 0xFF);
        break;
      case 2: text.insert(position(), fragments[rng() % fragments.size()]); break;
      case 3: {
        const size_t a = position(), b = position();
        text.erase(std::min(a, b), std::max(a, b) - std::min(a, b));
        break;
      }
      case 4: {
        const std::string& f = fragments[rng() % fragments.size()];
        text.insert(position(), f.substr(0, std::uniform_int_distribution<size_t>(0, f.size())(rng)));
        break;
      }
    }
  }
  return text;
}

TEST(ChatGolden, FuzzedCompletionsGiveAWellFormedMessageOrAnError) {
  const auto samples = valid_samples();
  std::mt19937 rng(7);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  size_t runs = 0, errors = 0;
  while (std::chrono::steady_clock::now() < deadline && runs < 50000) {
    const Sample& s = samples[rng() % samples.size()];
    const std::string text = mutate(s.text, rng);
    const std::string context = fmt::format("fuzz {} from {}: {}", runs, s.name, Json(text).dump(
                                                                                    -1, ' ', false, Json::error_handler_t::replace));
    Outcome whole;
    try {
      whole = parse_whole(text, s.options);
    } catch (const std::exception& e) {
      FAIL() << context << ": not a frank::Error: " << e.what();
    }
    const Outcome streamed = stream(text, random_cuts(text.size(), rng), s.options, context);
    ASSERT_TRUE(same(streamed, whole)) << context << "\nwhole: " << describe(whole) << "\nstreamed: " << describe(streamed);
    if (whole.ok) {
      for (const auto& call : whole.message.tool_calls) ASSERT_TRUE(nlohmann::json::parse(call.arguments).is_object());
    }
    errors += !whole.ok;
    ++runs;
  }
  RecordProperty("runs", static_cast<int>(runs));
  RecordProperty("errors", static_cast<int>(errors));
  EXPECT_GE(runs, 500u);
  EXPECT_GT(errors, 0u);
  EXPECT_LT(errors, runs);
}

}  // namespace
}  // namespace frank::test
