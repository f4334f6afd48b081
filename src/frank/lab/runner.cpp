#include "frank/lab/runner.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <tuple>

#include "frank/core/error.h"
#include "frank/lab/arm_order.h"
#include "frank/lab/draw.h"
#include "frank/lab/engine_process.h"
#include "frank/lab/gpu_telemetry.h"
#include "frank/lab/ledger_writer.h"
#include "frank/lab/registration.h"

namespace frank::lab {
namespace {

using nlohmann::json;
using Unit = std::tuple<int64_t, std::string, int64_t>;  // block, arm, start

// What the ledger already holds for each start: draws done, and whether the start was ended by a
// failure (then it is finished, whatever its draw count).
struct LedgerState {
  std::map<Unit, int64_t> draws;
  std::set<Unit> ended;
  int64_t total_draws = 0;
};

LedgerState ledger_state(const std::vector<json>& lines, const std::string& design_id) {
  LedgerState state;
  for (size_t i = 0; i < lines.size(); ++i) {
    const json& line = lines[i];
    if (!line.contains("design") || line["design"] != design_id)
      throw Error(fmt::format("ledger line {} belongs to design {}, not {}: use another ledger file", i + 1,
                              line.contains("design") ? line["design"].dump() : std::string("none"), design_id));
    const std::string kind = line.contains("kind") && line["kind"].is_string() ? line["kind"].get<std::string>() : "";
    if (kind != "draw" && kind != "event") throw Error(fmt::format("ledger line {}: unknown kind \"{}\"", i + 1, kind));
    if (!line.contains("block")) continue;  // run-level events
    try {
      const Unit unit{line.at("block").get<int64_t>(), line.at("arm").get<std::string>(),
                      line.at("start").get<int64_t>()};
      if (kind == "draw") {
        state.draws[unit] = std::max(state.draws[unit], line.at("draw").get<int64_t>() + 1);
        ++state.total_draws;
      } else if (line.value("event", "") == "start_failed" || line.value("event", "") == "engine_crashed") {
        state.ended.insert(unit);
      }
    } catch (const json::exception& e) {
      throw Error(fmt::format("ledger line {}: block, arm, start or draw is missing or mistyped ({})", i + 1,
                              e.what()));
    }
  }
  return state;
}

class Runner {
 public:
  Runner(const Design& design, const RunOptions& options)
      : design_(design),
        options_(options),
        id_(design_id(design)),
        spec_(parse_workload_spec(design.workload, options.design_dir)),
        workload_(load_sessions(spec_.path, spec_.sessions)),
        ledger_(options.ledger, existing_) {
    state_ = ledger_state(existing_, id_);
  }

  RunSummary run() {
    const auto orders = block_orders(design_, id_);
    event({{"event", "run_started"}, {"resumed", !existing_.empty()}, {"draws_in_ledger", state_.total_draws}});
    for (int64_t block = 0; block < static_cast<int64_t>(orders.size()); ++block) {
      std::map<std::string, int64_t> next_start;  // per arm: the start index within this block
      for (const std::string& arm : orders[static_cast<size_t>(block)])
        run_unit({block, arm, next_start[arm]++});
    }
    summary_.draws_in_ledger = state_.total_draws;
    event({{"event", "run_finished"}, {"draws_in_ledger", state_.total_draws}});
    return summary_;
  }

 private:
  const Arm& arm(const std::string& name) const {
    return design_.arms[0].name == name ? design_.arms[0] : design_.arms[1];
  }

  void event(json row, const Unit* unit = nullptr) {
    row["kind"] = "event";
    row["design"] = id_;
    if (unit) {
      row["block"] = std::get<0>(*unit);
      row["arm"] = std::get<1>(*unit);
      row["start"] = std::get<2>(*unit);
    }
    ledger_.append(std::move(row));
  }

  void run_unit(const Unit& unit) {
    const auto& [block, arm_name, start] = unit;
    const int64_t done = state_.draws.count(unit) ? state_.draws.at(unit) : 0;
    if (state_.ended.count(unit) || done >= design_.draws_per_start) return;
    const Arm& a = arm(arm_name);
    const int port = free_local_port();
    const std::string command = with_port(a.start, port), url = with_port(a.url, port);
    const auto log = logs_dir() / fmt::format("block{}-{}-start{}.log", block, arm_name, start);
    options_.progress(fmt::format("block {} arm {} start {}: starting `{}`{}", block, arm_name, start, command,
                                  done > 0 ? fmt::format(" (resuming at draw {})", done) : ""));
    EngineProcess engine(command, log);
    try {
      engine.wait_healthy(url, a.health, options_.start_timeout);
    } catch (const Error& e) {
      engine.stop();
      event({{"event", "start_failed"}, {"detail", e.what()}, {"log", log.string()}}, &unit);
      ++summary_.failed_starts;
      state_.ended.insert(unit);
      options_.progress(fmt::format("  failed to start: {}", e.what()));
      return;
    }
    event({{"event", "engine_started"}, {"pid", engine.pid()}, {"url", url}, {"first_draw", done}}, &unit);
    EngineClient client(url, options_.request_timeout);
    for (int64_t draw = done; draw < design_.draws_per_start; ++draw) {
      const json gpu_before = to_json(sample_gpus());
      try {
        const DrawResult result = run_draw(client, workload_, {spec_.wait_tool_time, log.parent_path() / "transcripts"});
        json row = result.to_json();
        row["kind"] = "draw";
        row["design"] = id_;
        row["block"] = block;
        row["arm"] = arm_name;
        row["start"] = start;
        row["draw"] = draw;
        row["gpu_before"] = gpu_before;
        row["gpu_after"] = to_json(sample_gpus());
        ledger_.append(std::move(row));
        ++summary_.draws_recorded;
        ++state_.total_draws;
        options_.progress(fmt::format("  draw {}: {} = {:.4f}", draw, design_.metric.name,
                                      result.metrics().count(design_.metric.name)
                                          ? result.metrics().at(design_.metric.name)
                                          : std::nan("")));
      } catch (const Error& e) {
        if (engine.ended_within(std::chrono::seconds(2))) {
          event({{"event", "engine_crashed"}, {"draw", draw}, {"exit", engine.exit_description()},
                 {"detail", e.what()}, {"log_tail", engine.log_tail()}},
                &unit);
          ++summary_.crashes;
          state_.ended.insert(unit);
          options_.progress(fmt::format("  engine crashed ({}) during draw {}", engine.exit_description(), draw));
          return;
        }
        event({{"event", "draw_failed"}, {"draw", draw}, {"detail", e.what()}}, &unit);
        ++summary_.failed_draws;
        options_.progress(fmt::format("  draw {} failed: {}", draw, e.what()));
      }
    }
    event({{"event", "engine_stopped"}, {"exit", engine.stop()}}, &unit);
  }

  std::filesystem::path logs_dir() const {
    return options_.logs.empty() ? std::filesystem::path(options_.ledger.string() + ".logs") : options_.logs;
  }

  const Design& design_;
  const RunOptions& options_;
  const std::string id_;
  const WorkloadSpec spec_;
  const std::vector<AgentSession> workload_;
  std::vector<json> existing_;
  LedgerWriter ledger_;
  LedgerState state_;
  RunSummary summary_;
};

}  // namespace

WorkloadSpec parse_workload_spec(const json& workload, const std::filesystem::path& design_dir) {
  WorkloadSpec spec;
  for (const auto& [key, value] : workload.items()) {
    if (key == "name") continue;
    if (key == "path" && value.is_string()) {
      spec.path = value.get<std::string>();
      if (spec.path.is_relative()) spec.path = design_dir / spec.path;
    } else if (key == "sessions" && value.is_array()) {
      for (const auto& id : value) {
        if (!id.is_string()) throw Error("workload.sessions: every entry must be a session id (string)");
        spec.sessions.push_back(id.get<std::string>());
      }
    } else if (key == "wait_tool_time" && value.is_boolean()) {
      spec.wait_tool_time = value.get<bool>();
    } else {
      throw Error(fmt::format("workload.{}: not a runner field of the right type (the runner reads \"path\": string, "
                              "\"sessions\": list of ids, \"wait_tool_time\": boolean)",
                              key));
    }
  }
  if (spec.path.empty()) throw Error("workload.path: the runner needs the workload file (JSONL)");
  return spec;
}

RunSummary run_design(const Design& design, const RunOptions& options) { return Runner(design, options).run(); }

}  // namespace frank::lab
