// `frank chat-encode`: DeepSeek's prompt and HF's ids for a fixture request, and clear errors
// (exit 1) for bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>


#include "chat_fixture.h"
#include "unit/safetensors_test_util.h"
#include "run_frank.h"
#include "unit/tokenizer_test_util.h"

namespace frank::test {
namespace {

using ::testing::HasSubstr;

FrankRun chat_encode(const std::string& input) {
  return run_frank("chat-encode --tokenizer " + deepseek_tokenizer_path().string(), input);
}

TEST(ChatCli, PrintsDeepSeeksPromptAndHfIds) {
  for (const auto& c : chat_conversations()) {
    if (c["name"] != "agent_loop_multi_step_thinking" && c["name"] != "tricky_string_arguments") continue;
    const FrankRun r = chat_encode(c["request"].dump());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto out = nlohmann::ordered_json::parse(r.out);
    EXPECT_EQ(out["prompt"], c["prompt"]) << c["name"];
    EXPECT_EQ(out["ids"], c["ids"]) << c["name"];
  }
}

TEST(ChatCli, BadRequestsExitWithAClearError) {
  FrankRun r = chat_encode(R"({"messages": [{"role": "robot", "content": "hi"}]})");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("error: chat request: messages[0].role: unknown role 'robot'"));
  r = chat_encode("{\"messages\": [");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("error: chat-encode: stdin is not JSON"));
  r = chat_encode(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"function": {"name": 7}}]})");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tools[0].function.name: must be a string"));
}

}  // namespace
}  // namespace frank::test
