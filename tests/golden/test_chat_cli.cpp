// `frank chat-encode`: DeepSeek's prompt and HF's ids for a fixture request, and clear errors
// (exit 1) for bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "chat_fixture.h"
#include "unit/safetensors_test_util.h"
#include "unit/tokenizer_test_util.h"

namespace frank::test {
namespace {

using ::testing::HasSubstr;

struct CliRun {
  int exit_code;
  std::string out;  // stdout
  std::string err;  // stderr
};

CliRun chat_encode(const std::string& input) {
  TempDir tmp;
  write_file(tmp / "stdin", input);
  const std::string cmd = fmt::format("{} chat-encode --tokenizer {} < {} 2> {}", FRANK_BINARY,
                                      deepseek_tokenizer_path().string(), (tmp / "stdin").string(),
                                      (tmp / "stderr").string());
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  std::ifstream err_file(tmp / "stderr");
  const std::string err((std::istreambuf_iterator<char>(err_file)), std::istreambuf_iterator<char>());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out, err};
}

TEST(ChatCli, PrintsDeepSeeksPromptAndHfIds) {
  for (const auto& c : chat_conversations()) {
    if (c["name"] != "agent_loop_multi_step_thinking" && c["name"] != "tricky_string_arguments") continue;
    const CliRun r = chat_encode(c["request"].dump());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto out = nlohmann::ordered_json::parse(r.out);
    EXPECT_EQ(out["prompt"], c["prompt"]) << c["name"];
    EXPECT_EQ(out["ids"], c["ids"]) << c["name"];
  }
}

TEST(ChatCli, BadRequestsExitWithAClearError) {
  CliRun r = chat_encode(R"({"messages": [{"role": "robot", "content": "hi"}]})");
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
