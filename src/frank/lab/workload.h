#pragma once
// Agent-session workloads (JSONL, one session per line; format "frank-agent-session/1", see
// docs/lab.md and workloads/README.md): a system prompt, tool definitions and the recorded turns of
// a coding agent. A draw replays the session: for each recorded assistant turn it asks the engine
// for a reply of the recorded length, then continues with the recorded turn, not the engine's.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace frank::lab {

struct SessionTurn {
  nlohmann::json message;         // the OpenAI chat message as sent (role, content, tool_calls, ...)
  int completion_tokens = 0;      // assistant turns: tokens to ask for (the recorded length)
  std::vector<int32_t> token_ids;  // assistant turns, optional: the recorded ids, forced on the engine
  double tool_time_s = 0.0;       // tool turns: how long the tool ran when recorded
};

struct Grader {
  std::string command;              // run with sh -c; exit status 0 = pass
  std::filesystem::path workspace;  // its working directory (relative paths: to the workload file)
};

struct AgentSession {
  std::string id, description, origin;  // origin: "file:line"
  std::string system;
  nlohmann::json tools = nlohmann::json::array();
  std::vector<SessionTurn> turns;
  std::optional<Grader> grader;
  int assistant_turns() const;
};

// Reads and checks every session of a workload file; errors name the file, line and field.
std::vector<AgentSession> load_workload(const std::filesystem::path& path);
// The sessions named by `ids`, in that order (all of them when `ids` is empty); an unknown id is a
// frank::Error that names it and the file.
std::vector<AgentSession> load_sessions(const std::filesystem::path& path, const std::vector<std::string>& ids);

}  // namespace frank::lab
