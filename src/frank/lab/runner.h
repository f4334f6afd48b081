#pragma once
// `frank lab run`: carries out a registered design. For every block in its registered start order
// it starts each arm's engine, waits until it is healthy, runs the draws, stops it, and appends
// every draw and every event (started, failed to start, crashed, a failed draw, stopped) to the
// hash-chained ledger. Nothing is retried into the data: an engine that fails to start or dies
// ends that start, recorded as such. A killed runner resumes from the ledger: finished starts are
// skipped; a start cut off mid-way gets a fresh engine and continues with its next draw.
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include "frank/lab/design.h"

namespace frank::lab {

struct RunOptions {
  std::filesystem::path design_dir;  // relative workload paths are relative to this
  std::filesystem::path ledger;
  std::filesystem::path logs;  // engine logs; default: the ledger's path + ".logs"
  std::chrono::seconds start_timeout{300};
  std::chrono::seconds request_timeout{600};
  std::function<void(const std::string&)> progress = [](const std::string&) {};
};

struct RunSummary {
  int64_t draws_recorded = 0;  // by this invocation
  int64_t draws_in_ledger = 0;
  int64_t failed_starts = 0, crashes = 0, failed_draws = 0;  // by this invocation
};

// The workload keys the runner reads from the design's "workload" object: "name", "path" (the
// JSONL file), optional "sessions" (ids to replay, in order; default all) and "wait_tool_time".
struct WorkloadSpec {
  std::filesystem::path path;
  std::vector<std::string> sessions;
  bool wait_tool_time = false;
};
WorkloadSpec parse_workload_spec(const nlohmann::json& workload, const std::filesystem::path& design_dir);

RunSummary run_design(const Design& design, const RunOptions& options);

}  // namespace frank::lab
