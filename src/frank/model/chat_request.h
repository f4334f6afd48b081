#pragma once
// An OpenAI-style chat request (messages, tools, thinking options), checked and reduced to what
// DeepSeek-V4's chat encoding uses. docs/chat.md lists the accepted fields and what they mean.
// The request must be an ordered_json: the order of keys in tool schemas and tool-call arguments
// is part of the prompt.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace frank::model {

enum class ChatRole { System, User, Assistant, Tool };

struct ChatToolCall {
  std::string id;  // empty when the request gave none
  std::string name;
  nlohmann::ordered_json arguments;  // a JSON object, keys in the order the request gave them
};

struct ChatMessage {
  ChatRole role = ChatRole::User;
  std::string content;  // a tool result given as text parts is joined with "\n\n", as DeepSeek does
  std::string reasoning_content;         // assistant
  std::vector<ChatToolCall> tool_calls;  // assistant
  std::string tool_call_id;              // tool
};

// DeepSeek-V4 has two levels; only Max changes the prompt (and only in thinking mode).
enum class ReasoningEffort { Unspecified, High, Max };

struct ChatRequest {
  std::vector<ChatMessage> messages;
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // the "function" objects, as given
  bool thinking = true;
  ReasoningEffort reasoning_effort = ReasoningEffort::Unspecified;
};

// Throws frank::Error naming the offending field for anything DeepSeek's encoder cannot express.
ChatRequest parse_chat_request(const nlohmann::ordered_json& request);

}  // namespace frank::model
