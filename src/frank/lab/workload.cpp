#include "frank/lab/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "frank/core/error.h"

namespace frank::lab {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "frank-agent-session/1";

std::string string_field(const json& object, const char* key, const std::string& where, bool required) {
  if (!object.contains(key)) {
    if (required) throw Error(fmt::format("{}: \"{}\" is required", where, key));
    return "";
  }
  if (!object.at(key).is_string()) throw Error(fmt::format("{}: \"{}\" must be a string", where, key));
  return object.at(key).get<std::string>();
}

SessionTurn parse_turn(const json& turn, const std::string& where, std::set<std::string>& open_calls) {
  if (!turn.is_object()) throw Error(fmt::format("{}: a turn must be an object", where));
  const std::string role = string_field(turn, "role", where, true);
  SessionTurn out;
  out.message = turn;
  if (role == "assistant") {
    if (!open_calls.empty())
      throw Error(fmt::format("{}: tool call {} has no tool result before the next assistant turn", where,
                              *open_calls.begin()));
    if (!turn.contains("completion_tokens") || !turn.at("completion_tokens").is_number_integer() ||
        turn.at("completion_tokens").get<int64_t>() < 1 || turn.at("completion_tokens").get<int64_t>() > (1 << 20))
      throw Error(fmt::format("{}: \"completion_tokens\" must be an integer in 1..1048576", where));
    out.completion_tokens = turn.at("completion_tokens").get<int>();
    if (turn.contains("token_ids")) {
      const json& ids = turn.at("token_ids");
      if (!ids.is_array() || ids.size() != static_cast<size_t>(out.completion_tokens))
        throw Error(fmt::format("{}: \"token_ids\" must be a list of completion_tokens ids", where));
      for (const auto& id : ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
          throw Error(fmt::format("{}: \"token_ids\" holds token ids (integers >= 0)", where));
        out.token_ids.push_back(id.get<int32_t>());
      }
    }
    if (turn.contains("tool_calls")) {
      if (!turn.at("tool_calls").is_array()) throw Error(fmt::format("{}: \"tool_calls\" must be a list", where));
      for (const auto& call : turn.at("tool_calls")) {
        if (!call.is_object()) throw Error(fmt::format("{}: a tool call must be an object", where));
        const std::string id = string_field(call, "id", where + ".tool_calls", true);
        if (!call.contains("function") || !call.at("function").is_object())
          throw Error(fmt::format("{}: tool call {} needs a \"function\" object", where, id));
        string_field(call.at("function"), "name", where + ".tool_calls." + id, true);
        string_field(call.at("function"), "arguments", where + ".tool_calls." + id, true);
        open_calls.insert(id);
      }
    }
    // Recording-only fields are not part of the message sent back.
    out.message.erase("completion_tokens");
    out.message.erase("token_ids");
  } else if (role == "tool") {
    const std::string id = string_field(turn, "tool_call_id", where, true);
    if (open_calls.erase(id) == 0)
      throw Error(fmt::format("{}: tool result for {}, which no earlier assistant turn called", where, id));
    if (turn.contains("tool_time_s")) {
      if (!turn.at("tool_time_s").is_number() || turn.at("tool_time_s").get<double>() < 0)
        throw Error(fmt::format("{}: \"tool_time_s\" must be a number >= 0", where));
      out.tool_time_s = turn.at("tool_time_s").get<double>();
    }
    out.message.erase("tool_time_s");
  } else if (role != "user" && role != "system") {
    throw Error(fmt::format("{}: unknown role \"{}\"", where, role));
  }
  return out;
}

AgentSession parse_session(const json& doc, const std::string& origin, const std::filesystem::path& dir) {
  if (!doc.is_object()) throw Error(fmt::format("{}: a session must be a JSON object", origin));
  if (string_field(doc, "format", origin, true) != kFormat)
    throw Error(fmt::format("{}: \"format\" must be \"{}\"", origin, kFormat));
  AgentSession s;
  s.origin = origin;
  s.id = string_field(doc, "id", origin, true);
  s.description = string_field(doc, "description", origin, false);
  s.system = string_field(doc, "system", origin, false);
  if (doc.contains("tools")) {
    if (!doc.at("tools").is_array()) throw Error(fmt::format("{}: \"tools\" must be a list", origin));
    s.tools = doc.at("tools");
  }
  if (!doc.contains("turns") || !doc.at("turns").is_array())
    throw Error(fmt::format("{}: \"turns\" must be a list", origin));
  std::set<std::string> open_calls;
  for (size_t i = 0; i < doc.at("turns").size(); ++i)
    s.turns.push_back(parse_turn(doc.at("turns")[i], fmt::format("{}: turns[{}]", origin, i), open_calls));
  if (!open_calls.empty())
    throw Error(fmt::format("{}: tool call {} has no tool result", origin, *open_calls.begin()));
  if (s.assistant_turns() == 0) throw Error(fmt::format("{}: the session has no assistant turn", origin));
  if (doc.contains("grader")) {
    const json& g = doc.at("grader");
    if (!g.is_object()) throw Error(fmt::format("{}: \"grader\" must be an object", origin));
    Grader grader;
    grader.command = string_field(g, "command", origin + ": grader", true);
    const std::string workspace = string_field(g, "workspace", origin + ": grader", false);
    grader.workspace = workspace.empty() ? dir : dir / workspace;
    s.grader = grader;
  }
  return s;
}

}  // namespace

int AgentSession::assistant_turns() const {
  int n = 0;
  for (const auto& t : turns) n += t.completion_tokens > 0;
  return n;
}

std::vector<AgentSession> load_workload(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot open workload '{}'", path.string()));
  std::vector<AgentSession> sessions;
  std::set<std::string> ids;
  std::string text;
  for (int64_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string origin = fmt::format("{}:{}", path.string(), number);
    const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) throw Error(fmt::format("{}: not valid JSON", origin));
    sessions.push_back(parse_session(doc, origin, path.parent_path()));
    if (!ids.insert(sessions.back().id).second)
      throw Error(fmt::format("{}: session id \"{}\" appears twice", origin, sessions.back().id));
  }
  if (sessions.empty()) throw Error(fmt::format("workload '{}' has no session", path.string()));
  return sessions;
}

std::vector<AgentSession> load_sessions(const std::filesystem::path& path, const std::vector<std::string>& ids) {
  std::vector<AgentSession> all = load_workload(path);
  if (ids.empty()) return all;
  std::vector<AgentSession> chosen;
  for (const std::string& id : ids) {
    auto it = std::find_if(all.begin(), all.end(), [&](const AgentSession& s) { return s.id == id; });
    if (it == all.end()) throw Error(fmt::format("no session \"{}\" in {}", id, path.string()));
    chosen.push_back(*it);
  }
  return chosen;
}

}  // namespace frank::lab
