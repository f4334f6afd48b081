#include "frank/model/chat_encoding.h"

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <map>
#include <string_view>

#include "frank/model/chat_markup.h"
#include "frank/model/python_json.h"

namespace frank::model {
namespace {

namespace mk = markup;
using Json = nlohmann::ordered_json;

// encoding_dsv4.py's REASONING_EFFORT_MAX, put before the first message in thinking mode.
constexpr std::string_view kReasoningEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

// encoding_dsv4.py's TOOLS_TEMPLATE, split around the tool schemas.
constexpr std::string_view kToolsHead =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "
    "\"<｜DSML｜tool_calls>\" block like the following:\n\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
    "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
    "<think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
constexpr std::string_view kToolsTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

// A piece of a user turn: its own text or one tool result.
struct Block {
  bool is_tool_result = false;
  std::string text;
  std::string tool_call_id;
};

// A message as DeepSeek's encoder renders it, after merge_tool_messages: there is no tool role;
// tool results and user text that follow one another form one user turn of blocks.
struct Turn {
  ChatRole role = ChatRole::User;
  std::string content;  // system, assistant
  std::string reasoning;
  const std::vector<ChatToolCall>* calls = nullptr;
  std::vector<Block> blocks;  // user
  bool has_tools = false;     // the system turn that carries the tool schemas
};

std::vector<Turn> to_turns(const ChatRequest& request) {
  std::vector<Turn> turns;
  // Request-level tools belong to a leading system message; DeepSeek renders them only there.
  if (!request.tools.empty() && request.messages.front().role != ChatRole::System)
    turns.emplace_back().role = ChatRole::System;
  for (const ChatMessage& m : request.messages) {
    if (m.role == ChatRole::User || m.role == ChatRole::Tool) {
      if (turns.empty() || turns.back().role != ChatRole::User) turns.emplace_back().role = ChatRole::User;
      turns.back().blocks.push_back(Block{m.role == ChatRole::Tool, m.content, m.tool_call_id});
    } else {
      Turn& turn = turns.emplace_back();
      turn.role = m.role;
      turn.content = m.content;
      turn.reasoning = m.reasoning_content;
      turn.calls = &m.tool_calls;
    }
  }
  if (!request.tools.empty()) turns.front().has_tools = true;
  return turns;
}

// sort_tool_results_by_call_order: the tool results of a user turn take the order of the calls in
// the latest assistant turn that made calls (a stable sort; blocks of user text keep their places).
void order_tool_results(std::vector<Turn>& turns) {
  std::map<std::string, size_t> call_order;
  for (Turn& turn : turns) {
    if (turn.role == ChatRole::Assistant && turn.calls && !turn.calls->empty()) {
      call_order.clear();
      for (size_t i = 0; i < turn.calls->size(); ++i)
        if (!(*turn.calls)[i].id.empty()) call_order[(*turn.calls)[i].id] = i;
    }
    if (turn.role != ChatRole::User || call_order.empty()) continue;
    std::vector<Block> results;
    for (const Block& b : turn.blocks)
      if (b.is_tool_result) results.push_back(b);
    if (results.size() < 2) continue;
    const auto rank = [&](const Block& b) {
      const auto it = call_order.find(b.tool_call_id);
      return it == call_order.end() ? size_t{0} : it->second;
    };
    std::stable_sort(results.begin(), results.end(), [&](const Block& a, const Block& b) { return rank(a) < rank(b); });
    auto next = results.begin();
    for (Block& b : turn.blocks)
      if (b.is_tool_result) b = *next++;
  }
}

std::string render_tools(const Json& tools) {
  std::string schemas;
  for (size_t i = 0; i < tools.size(); ++i) schemas += (i ? "\n" : "") + python_json_dumps(tools[i]);
  return std::string(kToolsHead) + schemas + std::string(kToolsTail);
}

void append(std::string& out, std::initializer_list<std::string_view> pieces) {
  for (const std::string_view piece : pieces) out += piece;
}

// String arguments go in as they are; every other value as Python's json.dumps writes it.
std::string render_tool_calls(const std::vector<ChatToolCall>& calls) {
  std::string out;
  append(out, {mk::kToolCallsStart, ">\n"});
  for (size_t i = 0; i < calls.size(); ++i) {
    append(out, {i ? "\n" : "", mk::kInvokeOpen, " name=\"", calls[i].name, "\">\n"});
    bool first = true;
    for (const auto& [key, value] : calls[i].arguments.items()) {
      const bool is_string = value.is_string();
      const std::string text = is_string ? value.get<std::string>() : python_json_dumps(value);
      append(out, {first ? "" : "\n", mk::kParameterOpen, " name=\"", key, "\" string=\"", is_string ? "true" : "false",
                   "\">", text, mk::kParameterClose, ">"});
      first = false;
    }
    append(out, {"\n", mk::kInvokeClose, ">"});
  }
  append(out, {"\n", mk::kToolCallsEnd});
  return out;
}

std::string render_user(const Turn& turn) {
  std::string out(mk::kUser);
  for (size_t i = 0; i < turn.blocks.size(); ++i) {
    const Block& b = turn.blocks[i];
    if (b.is_tool_result)
      append(out, {i ? "\n\n" : "", mk::kToolResultOpen, b.text, mk::kToolResultClose});
    else
      append(out, {i ? "\n\n" : "", b.text});
  }
  return out;
}

}  // namespace

std::string encode_chat(const Json& request) { return encode_chat(parse_chat_request(request)); }

std::string encode_chat(const ChatRequest& request) {
  std::vector<Turn> turns = to_turns(request);
  order_tool_results(turns);

  // DeepSeek drops the reasoning of turns before the last user turn, except when tools are
  // defined: then every turn keeps its reasoning. (Tool results count as user turns here.)
  const bool keep_all_reasoning = !request.tools.empty();
  const size_t n = turns.size();
  std::ptrdiff_t last_user = -1;
  for (size_t i = 0; i < n; ++i)
    if (turns[i].role == ChatRole::User) last_user = static_cast<std::ptrdiff_t>(i);

  std::string prompt(mk::kBos);
  for (size_t i = 0; i < n; ++i) {
    const Turn& turn = turns[i];
    if (i == 0 && request.thinking && request.reasoning_effort == ReasoningEffort::Max) prompt += kReasoningEffortMax;
    switch (turn.role) {
      case ChatRole::System:
        prompt += turn.content;
        if (turn.has_tools) prompt += "\n\n" + render_tools(request.tools);
        break;
      case ChatRole::User: prompt += render_user(turn); break;
      case ChatRole::Assistant: {
        const bool shows_reasoning = keep_all_reasoning || static_cast<std::ptrdiff_t>(i) > last_user;
        if (request.thinking && shows_reasoning) append(prompt, {turn.reasoning, mk::kThinkEnd});
        prompt += turn.content;
        if (!turn.calls->empty()) prompt += render_tool_calls(*turn.calls);
        prompt += mk::kEos;
        break;
      }
      case ChatRole::Tool: break;  // merged into user turns by to_turns
    }
    // A user turn that the assistant answers next (or that ends the prompt) hands over to it.
    const bool assistant_next = i + 1 == n || turns[i + 1].role == ChatRole::Assistant;
    if (turn.role == ChatRole::User && assistant_next) {
      const bool think = request.thinking && (keep_all_reasoning || static_cast<std::ptrdiff_t>(i) >= last_user);
      append(prompt, {mk::kAssistant, think ? mk::kThinkStart : mk::kThinkEnd});
    }
  }
  return prompt;
}

}  // namespace frank::model
