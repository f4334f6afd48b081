#include "frank/model/chat_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "frank/core/error.h"
#include "frank/model/python_json.h"

namespace frank::model {
namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw Error(fmt::format("chat request: {}: {}", path, problem));
}

bool absent(const Json& object, const char* key) { return !object.contains(key) || object.at(key).is_null(); }

const std::string& required_string(const Json& object, const char* key, const std::string& path) {
  if (!object.contains(key)) fail(path, fmt::format("'{}' is missing", key));
  if (!object.at(key).is_string()) fail(fmt::format("{}.{}", path, key), "must be a string");
  return object.at(key).get_ref<const std::string&>();
}

// Absent and null read as "" (an assistant message may carry only tool calls).
std::string optional_string(const Json& object, const char* key, const std::string& path) {
  return absent(object, key) ? std::string() : required_string(object, key, path);
}

const Json& required_object(const Json& object, const char* key, const std::string& path) {
  if (!object.contains(key)) fail(path, fmt::format("'{}' is missing", key));
  if (!object.at(key).is_object()) fail(fmt::format("{}.{}", path, key), "must be an object");
  return object.at(key);
}

void require_function_type(const Json& object, const std::string& path) {
  if (object.contains("type") && object.at("type") != "function")
    fail(path + ".type", "must be \"function\" (the only kind of tool DeepSeek-V4 knows)");
}

ChatToolCall parse_tool_call(const Json& call, const std::string& path) {
  if (!call.is_object()) fail(path, "must be an object");
  require_function_type(call, path);
  const Json& function = required_object(call, "function", path);
  ChatToolCall out;
  out.id = optional_string(call, "id", path);
  out.name = required_string(function, "name", path + ".function");
  if (out.name.empty()) fail(path + ".function.name", "must not be empty");
  const std::string& arguments = required_string(function, "arguments", path + ".function");
  try {
    out.arguments = parse_json_exact(arguments);
  } catch (const std::exception& e) {
    fail(path + ".function.arguments", fmt::format("is not valid JSON ({})", e.what()));
  }
  if (!out.arguments.is_object()) fail(path + ".function.arguments", "must be a JSON object");
  return out;
}

// Tool results may be text parts; DeepSeek's encoder joins them with blank lines.
std::string tool_result_content(const Json& message, const std::string& path) {
  if (!message.contains("content")) fail(path, "'content' is missing");
  const Json& content = message.at("content");
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) fail(path + ".content", "must be a string or an array of text parts");
  std::string joined;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string part_path = fmt::format("{}.content[{}]", path, i);
    if (!content[i].is_object() || !content[i].contains("type") || content[i].at("type") != "text")
      fail(part_path, "only {\"type\": \"text\"} parts are supported");
    joined += (i ? "\n\n" : "") + required_string(content[i], "text", part_path);
  }
  return joined;
}

ChatMessage parse_message(const Json& message, const std::string& path,
                          const std::vector<ChatToolCall>& latest_calls) {
  if (!message.is_object()) fail(path, "must be an object");
  const std::string& role = required_string(message, "role", path);
  ChatMessage out;
  if (role == "system" || role == "user") {
    out.role = role == "system" ? ChatRole::System : ChatRole::User;
    if (message.contains("content") && message.at("content").is_array())
      fail(path + ".content", "must be a string (content parts are not supported for this role)");
    out.content = required_string(message, "content", path);
  } else if (role == "assistant") {
    out.role = ChatRole::Assistant;
    out.content = optional_string(message, "content", path);
    out.reasoning_content = optional_string(message, "reasoning_content", path);
    if (!absent(message, "tool_calls")) {
      const Json& calls = message.at("tool_calls");
      if (!calls.is_array()) fail(path + ".tool_calls", "must be an array");
      std::set<std::string> ids;
      for (size_t i = 0; i < calls.size(); ++i) {
        const std::string call_path = fmt::format("{}.tool_calls[{}]", path, i);
        out.tool_calls.push_back(parse_tool_call(calls[i], call_path));
        const std::string& id = out.tool_calls.back().id;
        if (!id.empty() && !ids.insert(id).second) fail(call_path + ".id", fmt::format("'{}' is used twice", id));
      }
    }
  } else if (role == "tool") {
    out.role = ChatRole::Tool;
    if (absent(message, "tool_call_id")) fail(path, "a tool message needs 'tool_call_id'");
    out.tool_call_id = required_string(message, "tool_call_id", path);
    // DeepSeek orders tool results by the calls of the latest assistant message that made calls.
    const bool known = std::any_of(latest_calls.begin(), latest_calls.end(),
                                   [&](const ChatToolCall& c) { return c.id == out.tool_call_id; });
    if (!known)
      fail(path + ".tool_call_id",
           fmt::format("'{}' is not the id of a call in the latest assistant message with tool calls", out.tool_call_id));
    out.content = tool_result_content(message, path);
  } else {
    fail(path + ".role", fmt::format("unknown role '{}' (accepted: system, user, assistant, tool)", role));
  }
  return out;
}

Json parse_tools(const Json& request) {
  Json functions = Json::array();
  if (absent(request, "tools")) return functions;
  const Json& tools = request.at("tools");
  if (!tools.is_array()) fail("tools", "must be an array");
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string path = fmt::format("tools[{}]", i);
    if (!tools[i].is_object()) fail(path, "must be an object");
    require_function_type(tools[i], path);
    const Json& function = required_object(tools[i], "function", path);
    const std::string& name = required_string(function, "name", path + ".function");
    if (name.empty()) fail(path + ".function.name", "must not be empty");
    if (!names.insert(name).second) fail(path + ".function.name", fmt::format("'{}' is defined twice", name));
    functions.push_back(function);
  }
  return functions;
}

// tool_choice is checked but leaves the prompt alone: DeepSeek's encoder has no way to express
// it, so honouring "none", "required" or a named function is the sampler's job.
void check_tool_choice(const Json& request, const Json& tools) {
  if (absent(request, "tool_choice")) return;
  const Json& choice = request.at("tool_choice");
  if (choice == "none" || choice == "auto") return;
  if (tools.empty()) fail("tool_choice", "asks for a tool call but the request defines no tools");
  if (choice == "required") return;
  if (!choice.is_object()) fail("tool_choice", "must be \"none\", \"auto\", \"required\" or a function object");
  require_function_type(choice, "tool_choice");
  const std::string& name = required_string(required_object(choice, "function", "tool_choice"), "name",
                                            "tool_choice.function");
  const bool defined = std::any_of(tools.begin(), tools.end(), [&](const Json& f) { return f.at("name") == name; });
  if (!defined) fail("tool_choice.function.name", fmt::format("'{}' is not a defined tool", name));
}

bool parse_thinking(const Json& request) {
  if (absent(request, "thinking")) return true;  // DeepSeek-V4 thinks unless told not to
  const Json& thinking = request.at("thinking");
  if (!thinking.is_object()) fail("thinking", "must be an object like {\"type\": \"enabled\"}");
  const std::string& type = required_string(thinking, "type", "thinking");
  if (type != "enabled" && type != "disabled") fail("thinking.type", "must be \"enabled\" or \"disabled\"");
  return type == "enabled";
}

// DeepSeek's API takes "high" and "max"; OpenAI's lower levels map to high and "xhigh" to max.
ReasoningEffort parse_reasoning_effort(const Json& request) {
  if (absent(request, "reasoning_effort")) return ReasoningEffort::Unspecified;
  const Json& effort = request.at("reasoning_effort");
  if (effort == "low" || effort == "medium" || effort == "high") return ReasoningEffort::High;
  if (effort == "max" || effort == "xhigh") return ReasoningEffort::Max;
  fail("reasoning_effort", "must be one of \"low\", \"medium\", \"high\", \"max\", \"xhigh\"");
}

void check_response_format(const Json& request) {
  if (absent(request, "response_format")) return;
  const Json& format = request.at("response_format");
  if (!format.is_object() || !format.contains("type") || format.at("type") != "text")
    fail("response_format", "only {\"type\": \"text\"} is supported");
}

}  // namespace

ChatRequest parse_chat_request(const Json& request) {
  if (!request.is_object()) throw Error("chat request: must be a JSON object");
  if (!request.contains("messages") || !request.at("messages").is_array() || request.at("messages").empty())
    fail("messages", "must be a non-empty array");
  ChatRequest out;
  std::vector<ChatToolCall> latest_calls;
  const Json& messages = request.at("messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    out.messages.push_back(parse_message(messages[i], fmt::format("messages[{}]", i), latest_calls));
    if (!out.messages.back().tool_calls.empty()) latest_calls = out.messages.back().tool_calls;
  }
  out.tools = parse_tools(request);
  check_tool_choice(request, out.tools);
  out.thinking = parse_thinking(request);
  out.reasoning_effort = parse_reasoning_effort(request);
  check_response_format(request);
  return out;
}

}  // namespace frank::model
