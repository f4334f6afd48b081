// Bad OpenAI-style chat requests end in a frank::Error that names the field; the options that
// only select a mode map as docs/chat.md says.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frank/core/error.h"
#include "frank/model/chat_encoding.h"

namespace frank::model {
namespace {

using Json = nlohmann::ordered_json;
using ::testing::HasSubstr;

std::string error_of(const Json& request) {
  try {
    encode_chat(request);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Json with_messages(Json messages) { return Json{{"messages", std::move(messages)}}; }

Json user(const std::string& text) { return Json{{"role", "user"}, {"content", text}}; }

Json calling_assistant(const std::string& id) {
  return Json{{"role", "assistant"},
              {"content", nullptr},
              {"tool_calls", Json::array({Json{{"id", id},
                                               {"type", "function"},
                                               {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}};
}

TEST(ChatRequest, RejectsMissingOrEmptyMessages) {
  EXPECT_THAT(error_of(Json::array()), HasSubstr("must be a JSON object"));
  EXPECT_THAT(error_of(Json::object()), HasSubstr("messages: must be a non-empty array"));
  EXPECT_THAT(error_of(with_messages(Json::array())), HasSubstr("messages: must be a non-empty array"));
}

TEST(ChatRequest, RejectsUnknownRoles) {
  EXPECT_THAT(error_of(with_messages({Json{{"role", "developer"}, {"content", "x"}}})),
              HasSubstr("messages[0].role: unknown role 'developer'"));
  EXPECT_THAT(error_of(with_messages({Json{{"content", "x"}}})), HasSubstr("messages[0]: 'role' is missing"));
  EXPECT_THAT(error_of(with_messages({Json{{"role", 3}, {"content", "x"}}})), HasSubstr("messages[0].role: must be a string"));
}

TEST(ChatRequest, RejectsContentThatIsNotText) {
  EXPECT_THAT(error_of(with_messages({Json{{"role", "user"}, {"content", nullptr}}})),
              HasSubstr("messages[0].content: must be a string"));
  EXPECT_THAT(error_of(with_messages({Json{{"role", "user"}, {"content", Json::array({{{"type", "text"}, {"text", "x"}}})}}})),
              HasSubstr("content parts are not supported"));
  EXPECT_THAT(error_of(with_messages({user("q"), Json{{"role", "assistant"}, {"content", 5}}})),
              HasSubstr("messages[1].content: must be a string"));
}

TEST(ChatRequest, RejectsToolMessagesWithoutAMatchingCall) {
  EXPECT_THAT(error_of(with_messages({user("q"), calling_assistant("a"), Json{{"role", "tool"}, {"content", "r"}}})),
              HasSubstr("messages[2]: a tool message needs 'tool_call_id'"));
  EXPECT_THAT(error_of(with_messages({user("q"), Json{{"role", "tool"}, {"tool_call_id", "a"}, {"content", "r"}}})),
              HasSubstr("messages[1].tool_call_id: 'a' is not the id of a call"));
  EXPECT_THAT(error_of(with_messages({user("q"), calling_assistant("a"),
                                      Json{{"role", "tool"}, {"tool_call_id", "b"}, {"content", "r"}}})),
              HasSubstr("'b' is not the id of a call"));
  EXPECT_THAT(error_of(with_messages({user("q"), calling_assistant("a"),
                                      Json{{"role", "tool"},
                                           {"tool_call_id", "a"},
                                           {"content", Json::array({{{"type", "image_url"}}})}}})),
              HasSubstr("messages[2].content[0]: only {\"type\": \"text\"} parts are supported"));
}

TEST(ChatRequest, RejectsMalformedToolCalls) {
  auto assistant_with = [](Json call) {
    return with_messages({user("q"), Json{{"role", "assistant"}, {"tool_calls", Json::array({std::move(call)})}}});
  };
  EXPECT_THAT(error_of(assistant_with(Json{{"type", "function"}})), HasSubstr("tool_calls[0]: 'function' is missing"));
  EXPECT_THAT(error_of(assistant_with(Json{{"type", "web"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}})),
              HasSubstr("tool_calls[0].type: must be \"function\""));
  EXPECT_THAT(error_of(assistant_with(Json{{"function", {{"name", "f"}, {"arguments", "{\"a\": }"}}}})),
              HasSubstr("tool_calls[0].function.arguments: is not valid JSON"));
  EXPECT_THAT(error_of(assistant_with(Json{{"function", {{"name", "f"}, {"arguments", "[1]"}}}})),
              HasSubstr("tool_calls[0].function.arguments: must be a JSON object"));
  EXPECT_THAT(error_of(assistant_with(Json{{"function", {{"name", "f"}, {"arguments", Json{{"a", 1}}}}}})),
              HasSubstr("tool_calls[0].function.arguments: must be a string"));
  EXPECT_THAT(error_of(assistant_with(Json{{"function", {{"name", ""}, {"arguments", "{}"}}}})),
              HasSubstr("tool_calls[0].function.name: must not be empty"));
  EXPECT_THAT(error_of(assistant_with(Json{{"function", {{"name", "f"}, {"arguments", "{\"n\": 123456789012345678901234}"}}}})),
              HasSubstr("does not fit 64 bits"));
  Json twice = with_messages({user("q"), calling_assistant("a")});
  twice["messages"][1]["tool_calls"].push_back(twice["messages"][1]["tool_calls"][0]);
  EXPECT_THAT(error_of(twice), HasSubstr("tool_calls[1].id: 'a' is used twice"));
}

TEST(ChatRequest, RejectsMalformedTools) {
  Json request = with_messages({user("q")});
  request["tools"] = Json{{"type", "function"}};
  EXPECT_THAT(error_of(request), HasSubstr("tools: must be an array"));
  request["tools"] = Json::array({Json{{"type", "function"}}});
  EXPECT_THAT(error_of(request), HasSubstr("tools[0]: 'function' is missing"));
  request["tools"] = Json::array({Json{{"type", "function"}, {"function", {{"description", "no name"}}}}});
  EXPECT_THAT(error_of(request), HasSubstr("tools[0].function: 'name' is missing"));
  request["tools"] = Json::array({Json{{"type", "retrieval"}, {"function", {{"name", "f"}}}}});
  EXPECT_THAT(error_of(request), HasSubstr("tools[0].type: must be \"function\""));
  request["tools"] = Json::array({Json{{"function", {{"name", "f"}}}}, Json{{"function", {{"name", "f"}}}}});
  EXPECT_THAT(error_of(request), HasSubstr("tools[1].function.name: 'f' is defined twice"));
}

TEST(ChatRequest, ChecksToolChoiceAgainstTheTools) {
  Json request = with_messages({user("q")});
  request["tool_choice"] = "required";
  EXPECT_THAT(error_of(request), HasSubstr("tool_choice: asks for a tool call but the request defines no tools"));
  request["tools"] = Json::array({Json{{"type", "function"}, {"function", {{"name", "f"}}}}});
  request["tool_choice"] = Json{{"type", "function"}, {"function", {{"name", "g"}}}};
  EXPECT_THAT(error_of(request), HasSubstr("tool_choice.function.name: 'g' is not a defined tool"));
  request["tool_choice"] = "sometimes";
  EXPECT_THAT(error_of(request), HasSubstr("tool_choice: must be"));
  // A valid choice leaves the prompt as DeepSeek writes it without one.
  Json without = request;
  without.erase("tool_choice");
  for (const Json& choice : {Json("none"), Json("auto"), Json("required"),
                             Json{{"type", "function"}, {"function", {{"name", "f"}}}}}) {
    request["tool_choice"] = choice;
    EXPECT_EQ(encode_chat(request), encode_chat(without)) << choice.dump();
  }
}

TEST(ChatRequest, RejectsUnknownThinkingOptions) {
  Json request = with_messages({user("q")});
  request["thinking"] = true;
  EXPECT_THAT(error_of(request), HasSubstr("thinking: must be an object"));
  request["thinking"] = Json{{"type", "auto"}};
  EXPECT_THAT(error_of(request), HasSubstr("thinking.type: must be \"enabled\" or \"disabled\""));
  request.erase("thinking");
  request["reasoning_effort"] = "extreme";
  EXPECT_THAT(error_of(request), HasSubstr("reasoning_effort: must be one of"));
  request["reasoning_effort"] = nullptr;
  EXPECT_NO_THROW(encode_chat(request));
}

TEST(ChatRequest, RejectsResponseFormatsItCannotExpress) {
  Json request = with_messages({user("q")});
  request["response_format"] = Json{{"type", "json_object"}};
  EXPECT_THAT(error_of(request), HasSubstr("response_format: only {\"type\": \"text\"} is supported"));
  request["response_format"] = Json{{"type", "text"}};
  EXPECT_NO_THROW(encode_chat(request));
}

TEST(ChatRequest, IgnoresSamplingFieldsAndMessageNames) {
  Json plain = with_messages({user("q")});
  Json extra = plain;
  extra["model"] = "deepseek-v4-flash";
  extra["temperature"] = 0.7;
  extra["stream"] = true;
  extra["messages"][0]["name"] = "alice";
  EXPECT_EQ(encode_chat(extra), encode_chat(plain));
}

}  // namespace
}  // namespace frank::model
