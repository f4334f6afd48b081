#include "frank/lab/draw.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "frank/core/error.h"

namespace frank::lab {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Counters {
  MetricSamples samples;
  bool available = false;
};

Counters read_counters(EngineClient& client) {
  const HttpReply reply = client.get("/metrics");
  if (!reply.ok()) return {};
  return {parse_prometheus_text(reply.body), true};
}

double read_verify_steps(EngineClient& client) {
  return metric_sum(read_counters(client).samples, "frank_verify_steps_total");
}

// Sends one streamed chat request and times it. Returns the engine's reply text (for graders).
std::string timed_request(EngineClient& client, const json& body, RequestRecord& record, const std::string& where) {
  std::string text;
  bool first = true;
  Clock::time_point first_chunk, last_chunk;
  json usage;
  const auto sent = Clock::now();
  auto on_chunk = [&](const json& event) {
    const auto now = Clock::now();
    if (event.contains("error")) throw Error(fmt::format("{}: the engine reported an error: {}", where, event.dump()));
    if (event.contains("usage") && event["usage"].is_object()) usage = event["usage"];
    if (!event.contains("choices") || !event["choices"].is_array() || event["choices"].empty()) return;
    if (first) first_chunk = now;
    first = false;
    last_chunk = now;
    const json& choice = event["choices"][0];
    if (!choice.is_object()) return;
    // The reply as the agent would see it: reasoning (thinking mode) and content.
    if (choice.contains("delta") && choice["delta"].is_object())
      for (const char* key : {"reasoning_content", "content"})
        if (choice["delta"].contains(key) && choice["delta"][key].is_string())
          text += choice["delta"][key].get<std::string>();
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      record.finish_reason = choice["finish_reason"].get<std::string>();
  };
  const HttpReply reply = client.post_stream("/v1/chat/completions", body, [&](const json& event) {
    try {
      on_chunk(event);
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}: the engine streamed a malformed chunk ({}): {}", where, e.what(),
                              event.dump().substr(0, 300)));
    }
  });
  if (!reply.ok()) throw Error(fmt::format("{}: {}", where, reply.failure()));
  if (first) throw Error(fmt::format("{}: the engine streamed no chunk", where));
  record.ttft_s = seconds(first_chunk - sent);
  record.decode_s = seconds(last_chunk - first_chunk);
  if (usage.is_object()) {
    try {
      record.prompt_tokens = usage.value("prompt_tokens", 0);
      record.completion_tokens = usage.value("completion_tokens", 0);
      if (usage.contains("prompt_tokens_details") && usage["prompt_tokens_details"].is_object())
        record.cached_tokens = usage["prompt_tokens_details"].value("cached_tokens", 0);
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}: the engine's usage is malformed ({}): {}", where, e.what(), usage.dump()));
    }
  }
  return text;
}

// Runs the session's grader on its transcript; true when it exits 0.
bool grade(const AgentSession& session, const json& transcript, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const auto path = dir / (session.id + ".transcript.json");
  std::ofstream(path) << transcript.dump(2) << "\n";
  const pid_t pid = fork();
  if (pid < 0) throw Error("fork failed while starting a grader");
  if (pid == 0) {
    setenv("FRANK_TRANSCRIPT", std::filesystem::absolute(path).c_str(), 1);
    if (chdir(session.grader->workspace.c_str()) != 0) _exit(126);
    execl("/bin/sh", "sh", "-c", session.grader->command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::filesystem::path transcript_dir(const DrawOptions& options) {
  if (!options.transcripts.empty()) return options.transcripts;
  return std::filesystem::temp_directory_path() / fmt::format("frank-lab-transcripts-{}", getpid());
}

}  // namespace

DrawResult run_draw(EngineClient& client, const std::vector<AgentSession>& workload, const DrawOptions& options) {
  DrawResult draw;
  const std::string model = served_model_id(client);
  const Counters before = read_counters(client);
  const auto start = Clock::now();
  auto previous_end = start;
  for (const AgentSession& session : workload) {
    json messages = json::array();
    if (!session.system.empty()) messages.push_back({{"role", "system"}, {"content", session.system}});
    json transcript{{"session", session.id}, {"replies", json::array()}};
    for (size_t i = 0; i < session.turns.size(); ++i) {
      const SessionTurn& turn = session.turns[i];
      if (turn.completion_tokens > 0) {
        // The agent asks for the next assistant turn; the recorded length is forced with
        // ignore_eos so that every arm decodes the same number of tokens.
        json body{{"model", model},
                  {"messages", messages},
                  {"stream", true},
                  {"stream_options", {{"include_usage", true}}},
                  {"max_tokens", turn.completion_tokens},
                  {"ignore_eos", true},
                  {"temperature", 0}};
        if (!session.tools.empty()) body["tools"] = session.tools;
        // Recorded ids: the engine decodes exactly those (frank's forced-decode extension).
        if (!turn.token_ids.empty()) body["forced_completion_ids"] = turn.token_ids;
        RequestRecord record;
        record.session = session.id;
        record.turn = static_cast<int>(i);
        const double verify_before = before.available ? read_verify_steps(client) : 0;
        const auto sent = Clock::now();
        record.gap_s = seconds(sent - previous_end);
        const std::string reply =
            timed_request(client, body, record, fmt::format("session {} turn {}", session.id, i));
        previous_end = Clock::now();
        if (before.available) record.verify_steps = read_verify_steps(client) - verify_before;
        transcript["replies"].push_back({{"turn", i}, {"content", reply}});
        draw.requests.push_back(record);
      }
      if (turn.tool_time_s > 0 && options.wait_tool_time) {
        std::this_thread::sleep_for(std::chrono::duration<double>(turn.tool_time_s));
        draw.tool_s += turn.tool_time_s;
      }
      messages.push_back(turn.message);
    }
    if (session.grader) {
      transcript["messages"] = messages;
      ++draw.sessions_graded;
      draw.sessions_passed += grade(session, transcript, transcript_dir(options));
    }
  }
  draw.task_time_s = seconds(Clock::now() - start);
  const Counters after = read_counters(client);
  if (before.available && after.available) {
    draw.has_counters = true;
    draw.counters = counter_deltas(before.samples, after.samples);
  }
  int64_t requests_with_tokens = 0;
  for (const auto& r : draw.requests) {
    draw.decode_s += r.decode_s;
    (r.warm() ? draw.warm_ttft_s : draw.cold_ttft_s) += r.ttft_s;
    draw.output_tokens += r.completion_tokens;
    requests_with_tokens += r.completion_tokens > 0;
  }
  draw.outside_s = draw.task_time_s - draw.decode_s - draw.cold_ttft_s - draw.warm_ttft_s - draw.tool_s;
  // A request's first token comes from its prefill; each later one from a decode (or verify) step.
  const double verify_steps = metric_sum(draw.counters, "frank_verify_steps_total");
  draw.decode_steps = verify_steps > 0 ? static_cast<int64_t>(verify_steps) : draw.output_tokens - requests_with_tokens;
  return draw;
}

std::map<std::string, double> DrawResult::metrics() const {
  std::map<std::string, double> m{{"task_time_s", task_time_s},
                                  {"decode_s", decode_s},
                                  {"cold_ttft_s", cold_ttft_s},
                                  {"warm_ttft_s", warm_ttft_s},
                                  {"tool_s", tool_s},
                                  {"outside_s", outside_s},
                                  {"requests", static_cast<double>(requests.size())},
                                  {"output_tokens", static_cast<double>(output_tokens)},
                                  {"decode_steps", static_cast<double>(decode_steps)}};
  if (decode_s > 0) m["decode_tokens_per_s"] = static_cast<double>(decode_steps) / decode_s;
  if (decode_steps > 0) m["ms_per_decode_step"] = 1000 * decode_s / static_cast<double>(decode_steps);
  const double verify_steps = metric_sum(counters, "frank_verify_steps_total");
  if (verify_steps > 0) {
    m["tokens_per_verify_step"] = static_cast<double>(output_tokens) / verify_steps;
    // The engine's own timing of its verify steps, when it keeps a histogram of them.
    const double verify_seconds = metric_sum(counters, "frank_verify_step_seconds_sum");
    if (verify_seconds > 0) m["ms_per_verify_step"] = 1000 * verify_seconds / verify_steps;
  }
  if (sessions_graded > 0) m["passed"] = static_cast<double>(sessions_passed) / sessions_graded;
  return m;
}

json DrawResult::to_json() const {
  json reqs = json::array();
  for (const auto& r : requests)
    reqs.push_back({{"session", r.session},
                    {"turn", r.turn},
                    {"prompt_tokens", r.prompt_tokens},
                    {"cached_tokens", r.cached_tokens},
                    {"completion_tokens", r.completion_tokens},
                    {"cache", r.warm() ? "warm" : "cold"},
                    {"gap_s", r.gap_s},
                    {"ttft_s", r.ttft_s},
                    {"decode_s", r.decode_s},
                    {"verify_steps", r.verify_steps},
                    {"finish_reason", r.finish_reason}});
  json doc{{"metrics", metrics()}, {"requests", reqs}};
  if (has_counters) doc["server_counters"] = counters;
  return doc;
}

std::string draw_report(const DrawResult& d) {
  std::string out = fmt::format("{} requests, {} output tokens, {:.3f} s in all\n", d.requests.size(), d.output_tokens,
                                d.task_time_s);
  out += fmt::format("{:<6} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9}  {}\n", "turn", "prompt", "cached", "gap s",
                     "ttft s", "decode s", "tokens", "session");
  for (const auto& r : d.requests)
    out += fmt::format("{:<6} {:>8} {:>7} {:>9.3f} {:>9.3f} {:>9.3f} {:>9}  {}\n", r.turn, r.prompt_tokens,
                       r.cached_tokens, r.gap_s, r.ttft_s, r.decode_s, r.completion_tokens, r.session);
  auto share = [&](double s) { return d.task_time_s > 0 ? 100 * s / d.task_time_s : 0.0; };
  out += "time breakdown:\n";
  for (const auto& [name, s] : {std::pair{"decode", d.decode_s}, {"cold TTFT", d.cold_ttft_s},
                                {"warm TTFT", d.warm_ttft_s}, {"tool", d.tool_s}, {"outside", d.outside_s}})
    out += fmt::format("  {:<10} {:>9.3f} s  {:>5.1f}%\n", name, s, share(s));
  out += fmt::format("worth: 1 ms off each of the {} decode steps saves {:.3f} s per draw; prefill 10% faster saves "
                     "{:.3f} s per draw\n",
                     d.decode_steps, d.decode_steps / 1000.0, 0.1 * (d.cold_ttft_s + d.warm_ttft_s));
  if (d.sessions_graded > 0) out += fmt::format("graded: {} of {} sessions passed\n", d.sessions_passed, d.sessions_graded);
  if (!d.has_counters) out += "the engine serves no /metrics: no server-side counters\n";
  return out;
}

}  // namespace frank::lab
