#pragma once
// One draw: a workload replayed once against a running engine, timed request by request, with
// the engine's own counters read before and after, and a breakdown of where the time went.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frank/lab/engine_client.h"
#include "frank/lab/prometheus_text.h"
#include "frank/lab/workload.h"

namespace frank::lab {

struct DrawOptions {
  bool wait_tool_time = false;       // sleep each tool turn's recorded time, as the agent would
  std::filesystem::path transcripts;  // where graders' transcripts go (empty: a temporary directory)
};

struct RequestRecord {
  std::string session;
  int turn = 0;  // index of the assistant turn in the session's turns
  int prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  double gap_s = 0;   // from the end of the previous request (or the draw's start) to this one
  double ttft_s = 0;  // request sent -> first streamed chunk
  double decode_s = 0;  // first chunk -> last chunk
  double verify_steps = 0;  // the engine's frank_verify_steps_total moved by this much (0: none or unknown)
  std::string finish_reason;
  bool warm() const { return cached_tokens > 0; }
};

struct DrawResult {
  std::vector<RequestRecord> requests;
  double task_time_s = 0;
  double decode_s = 0, cold_ttft_s = 0, warm_ttft_s = 0, tool_s = 0, outside_s = 0;
  int64_t output_tokens = 0, decode_steps = 0;  // decode steps: verify steps if the engine counts them
  MetricSamples counters;                       // the engine's counters that moved during the draw
  bool has_counters = false;                    // the engine serves /metrics
  int sessions_graded = 0, sessions_passed = 0;
  std::map<std::string, double> metrics() const;  // the ledger's metrics for this draw
  nlohmann::json to_json() const;                 // everything, for the ledger and `lab draw --out`
};

// Replays every session of the workload in order. Throws frank::Error naming the session and turn
// when a request fails (the engine's reply or the connection error is in the message).
DrawResult run_draw(EngineClient& client, const std::vector<AgentSession>& workload, const DrawOptions& options);

// The readable breakdown `frank lab draw` prints, with what a faster step or prefill is worth.
std::string draw_report(const DrawResult& draw);

}  // namespace frank::lab
