// The streaming parser's events and end-of-text rules on small hand-written completions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frank/core/error.h"
#include "frank/model/chat_parser.h"

namespace frank::model {
namespace {

using ::testing::HasSubstr;
using Kind = ChatEvent::Kind;

const std::string kEos = "<｜end▁of▁sentence｜>";
const std::string kCall =
    "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"search\">\n"
    "<｜DSML｜parameter name=\"q\" string=\"true\">say \"hi\"\n</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"n\" string=\"false\">[1, 2]</｜DSML｜parameter>\n"
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";

std::string error_of(const std::string& text, ChatParserOptions options = {}) {
  try {
    parse_chat_completion(text, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

ChatParserOptions mode(bool thinking) {
  ChatParserOptions options;
  options.thinking = thinking;
  return options;
}
const ChatParserOptions kThinking = mode(true), kChat = mode(false);

TEST(ChatParser, EventsOfAThinkingTurnWithACall) {
  ChatParserOptions options = kThinking;
  options.call_id_prefix = "req7_";
  ChatStreamParser parser(options);
  const size_t in_string = kCall.find("say") + 3, in_json = kCall.find("[1") + 2;
  std::vector<std::vector<ChatEvent>> fed;
  for (const std::string& piece : {std::string("Look it "), std::string("up.</th"), std::string("ink>Sure."),
                                  kCall.substr(0, in_string), kCall.substr(in_string, in_json - in_string),
                                  kCall.substr(in_json), kEos})
    fed.push_back(parser.feed(piece));
  fed.push_back(parser.finish());

  EXPECT_EQ(fed[0].at(0).kind, Kind::ReasoningDelta);
  EXPECT_EQ(fed[0].at(0).text, "Look it ");
  EXPECT_EQ(fed[1].at(0).text, "up.");  // "</th" waits for the rest of the tag
  EXPECT_EQ(fed[2].at(0).kind, Kind::ContentDelta);
  EXPECT_EQ(fed[2].at(0).text, "Sure.");
  ASSERT_EQ(fed[3].size(), 2u);
  EXPECT_EQ(fed[3][0].kind, Kind::ToolCallBegin);
  EXPECT_EQ(fed[3][0].call.id, "req7_0");
  EXPECT_EQ(fed[3][0].call.name, "search");
  EXPECT_EQ(fed[3][1].text, "{\"q\": \"say");  // a string value streams as it comes
  ASSERT_EQ(fed[4].size(), 1u);
  EXPECT_EQ(fed[4][0].text, " \\\"hi\\\"\\n\"");  // a JSON value waits until it is complete and checked
  ASSERT_EQ(fed[5].size(), 2u);
  EXPECT_EQ(fed[5][0].text, ", \"n\": [1, 2]}");
  EXPECT_EQ(fed[5][1].kind, Kind::ToolCallEnd);
  EXPECT_EQ(fed[5][1].call.arguments, "{\"q\": \"say \\\"hi\\\"\\n\", \"n\": [1, 2]}");
  EXPECT_TRUE(fed[6].empty() && fed[7].empty());

  EXPECT_EQ(to_openai_message(parser.message()).dump(),
            R"({"role":"assistant","content":"Sure.","reasoning_content":"Look it up.","tool_calls":[{"id":"req7_0",)"
            R"("type":"function","function":{"name":"search","arguments":"{\"q\": \"say \\\"hi\\\"\\n\", \"n\": [1, 2]}"}}]})");
}

TEST(ChatParser, TextHeldBackAtTheEndIsPlainText) {
  ChatStreamParser parser(kChat);
  EXPECT_EQ(parser.feed("a\n\n<｜DS").size(), 1u);  // "\n\n<｜DS" may start a tool-call block
  EXPECT_EQ(parser.message().content, "a");
  parser.finish();
  EXPECT_EQ(parser.message().content, "a\n\n<｜DS");
}

TEST(ChatParser, AStopInsideReasoningOrContentIsATruncatedAnswer) {
  EXPECT_EQ(parse_chat_completion("thinking so far", kThinking).reasoning_content, "thinking so far");
  const auto message = parse_chat_completion("r</think>partial answer", kThinking);
  EXPECT_EQ(message.reasoning_content, "r");
  EXPECT_EQ(message.content, "partial answer");
  EXPECT_EQ(parse_chat_completion("x" + kCall, kChat).tool_calls.size(), 1u);
}

TEST(ChatParser, AStopInsideTheToolCallBlockIsAnError) {
  for (const size_t cut : {size_t{23}, size_t{30}, size_t{60}, size_t{100}, size_t{150}, kCall.size() - 1}) {
    const std::string text = "x" + kCall.substr(0, cut);
    EXPECT_THAT(error_of(text, kChat), HasSubstr("ends inside the tool-call block")) << cut;
  }
}

TEST(ChatParser, SpecialTokensAreNotText) {
  EXPECT_THAT(error_of("a<think>b", kChat), HasSubstr("\"<think>\" inside the content"));
  EXPECT_THAT(error_of("a</think>b" + kEos, kChat), HasSubstr("inside the content"));
  EXPECT_THAT(error_of("r" + kEos, kThinking), HasSubstr("inside the reasoning"));
  EXPECT_THAT(error_of("r" + kCall, kThinking), HasSubstr("tool-call block inside the reasoning"));
  EXPECT_THAT(error_of("a｜DSML｜b", kChat), HasSubstr("inside the content"));
}

TEST(ChatParser, NothingMayFollowTheEnd) {
  EXPECT_THAT(error_of("done" + kEos + " more", kChat), HasSubstr("text after the end-of-sentence token"));
  EXPECT_THAT(error_of("x" + kCall + "\n", kChat), HasSubstr("text after the tool-call block"));
  ChatStreamParser parser(kChat);
  parser.feed("done" + kEos);
  parser.finish();
  EXPECT_THROW(parser.feed("x"), Error);
}

TEST(ChatParser, ErrorsSayWhereAndTheParserStaysFailed) {
  ChatStreamParser parser(kChat);
  parser.feed("ab");
  try {
    parser.feed("<think>");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("at byte 9"));
  }
  EXPECT_THROW(parser.feed("more"), Error);
  EXPECT_THROW(parser.finish(), Error);
}

TEST(ChatParser, RejectsBytesThatAreNotUtf8) {
  EXPECT_THAT(error_of("ok \xff", kChat), HasSubstr("not valid UTF-8 (at byte 3"));
  EXPECT_THAT(error_of("ok \xe4\xb8", kChat), HasSubstr("ends inside a UTF-8 character"));
  EXPECT_THAT(error_of("\xed\xa0\x80", kChat), HasSubstr("not valid UTF-8"));  // a surrogate
  // A character split between two deltas is held back, never cut.
  ChatStreamParser parser(kChat);
  EXPECT_TRUE(parser.feed("\xe4\xb8").empty());
  EXPECT_EQ(parser.feed("\xad").at(0).text, "中");
}

TEST(ChatParser, CallsWithoutParametersAndSeveralCalls) {
  const std::string text =
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"now\">\n\n</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"echo\">\n<｜DSML｜parameter name=\"s\" string=\"true\"></｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>" + kEos;
  const auto message = parse_chat_completion(text, kChat);
  ASSERT_EQ(message.tool_calls.size(), 2u);
  EXPECT_EQ(message.tool_calls[0].name, "now");
  EXPECT_EQ(message.tool_calls[0].arguments, "{}");
  EXPECT_EQ(message.tool_calls[1].id, "call_1");
  EXPECT_EQ(message.tool_calls[1].arguments, "{\"s\": \"\"}");
}

}  // namespace
}  // namespace frank::model
