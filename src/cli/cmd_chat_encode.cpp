// `frank chat-encode`: an OpenAI-style chat request on stdin -> DeepSeek-V4's prompt string and its
// token ids, printed as {"prompt": ..., "ids": [...]} (docs/chat.md lists the request fields).
//
//   frank chat-encode --tokenizer FILE < request.json
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "frank/core/error.h"
#include "frank/model/chat_encoding.h"
#include "frank/model/python_json.h"
#include "frank/model/tokenizer.h"

namespace frank::cli {
namespace {

struct ChatEncodeOptions {
  std::string tokenizer;
};

void run(const ChatEncodeOptions& o) {
  const std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  nlohmann::ordered_json request;
  try {
    request = model::parse_json_exact(input);  // keeps key order, which the prompt depends on
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(std::string("chat-encode: stdin is not JSON (") + e.what() + ")");
  }
  const std::string prompt = model::encode_chat(request);
  const auto tokenizer = model::Tokenizer::load(o.tokenizer);
  // The prompt already starts with the BOS token's text, so no BOS is added.
  const nlohmann::ordered_json out = {{"prompt", prompt}, {"ids", tokenizer.encode(prompt, /*add_bos=*/false)}};
  std::cout << out.dump() << "\n";
}

}  // namespace

void register_chat_encode(CLI::App& app) {
  auto opts = std::make_shared<ChatEncodeOptions>();
  auto* cmd = app.add_subcommand("chat-encode", "OpenAI-style chat request on stdin -> {\"prompt\", \"ids\"} as JSON");
  cmd->add_option("--tokenizer", opts->tokenizer, "tokenizer.json")->required();
  cmd->callback([opts] { run(*opts); });
}

}  // namespace frank::cli
