// `frank lab draw | run | fidelity`: the lab commands that talk to running engines. `draw` replays
// a workload once against a server and prints the time breakdown; `run` carries out a registered
// design (starting and stopping the arms, writing the hash-chained ledger, resuming after a kill);
// `fidelity` screens engine B against engine A on reference prompts with an A/A baseline.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "commands.h"
#include "frank/core/error.h"
#include "frank/lab/design.h"
#include "frank/lab/draw.h"
#include "frank/lab/fidelity_screen.h"
#include "frank/lab/gpu_telemetry.h"
#include "frank/lab/registration.h"
#include "frank/lab/report.h"
#include "frank/lab/runner.h"

namespace frank::cli {
namespace {

struct DrawOptions {
  std::string server, workload, out;
  std::vector<std::string> sessions;
  bool wait_tool_time = false;
  int timeout_s = 600;
};

struct RunOptions {
  std::string design, ledger, logs;
  int start_timeout_s = 300, request_timeout_s = 600;
};

struct FidelityCliOptions {
  lab::FidelityOptions screen;
  std::string items, json_out, logs;
  int start_timeout_s = 300;
};

void run_draw(const DrawOptions& o) {
  const std::vector<lab::AgentSession> sessions = lab::load_sessions(o.workload, o.sessions);
  lab::EngineClient client(o.server, std::chrono::seconds(o.timeout_s));
  const auto gpu_before = lab::to_json(lab::sample_gpus());
  const lab::DrawResult draw = lab::run_draw(client, sessions, {o.wait_tool_time, {}});
  std::cout << lab::draw_report(draw);
  if (!o.out.empty()) {
    nlohmann::json doc = draw.to_json();
    doc["gpu_before"] = gpu_before;
    doc["gpu_after"] = lab::to_json(lab::sample_gpus());
    std::ofstream(o.out) << doc.dump(2) << "\n";
  }
}

void run_design(const RunOptions& o) {
  const lab::Design design = lab::load_design(o.design);
  // What was registered, before anything runs: the id, the start orders and the smallest p.
  std::cout << lab::registration_report(design, lab::register_design(design), std::nullopt) << std::endl;
  lab::RunOptions options;
  options.design_dir = std::filesystem::absolute(o.design).parent_path();
  options.ledger = o.ledger;
  options.logs = o.logs;
  options.start_timeout = std::chrono::seconds(o.start_timeout_s);
  options.request_timeout = std::chrono::seconds(o.request_timeout_s);
  options.progress = [](const std::string& line) { std::cout << line << std::endl; };
  const lab::RunSummary s = lab::run_design(design, options);
  std::cout << fmt::format(
      "run finished: {} draws recorded now, {} in the ledger; {} failed starts, {} crashes, {} failed draws\n"
      "analyze with: frank lab analyze --design {} --ledger {}\n",
      s.draws_recorded, s.draws_in_ledger, s.failed_starts, s.crashes, s.failed_draws, o.design, o.ledger);
}

void run_fidelity(FidelityCliOptions o) {
  o.screen.logs = o.logs.empty() ? std::filesystem::temp_directory_path() / "frank-fidelity-logs"
                                 : std::filesystem::path(o.logs);
  o.screen.start_timeout = std::chrono::seconds(o.start_timeout_s);
  o.screen.progress = [](const std::string& line) { std::cout << line << std::endl; };
  const auto result = lab::run_fidelity(lab::load_fidelity_items(o.items), o.screen);
  std::cout << lab::fidelity_report(result, o.screen);
  if (!o.json_out.empty()) std::ofstream(o.json_out) << result.to_json().dump(2) << "\n";
}

}  // namespace

void register_lab_engines(CLI::App& lab) {
  auto d = std::make_shared<DrawOptions>();
  auto* draw = lab.add_subcommand("draw", "replay a workload once against a running server; print the time breakdown");
  draw->add_option("--server", d->server, "the server's base URL, e.g. http://127.0.0.1:8000")->required();
  draw->add_option("--workload", d->workload, "agent sessions (JSONL, frank-agent-session/1)")->required();
  draw->add_option("--session", d->sessions, "replay only these session ids (repeatable; default all)");
  draw->add_flag("--wait-tool-time", d->wait_tool_time, "sleep each tool result's recorded time, as the agent did");
  draw->add_option("--timeout", d->timeout_s, "seconds to wait for each read from the server")->capture_default_str();
  draw->add_option("--out", d->out, "write the draw (per request, breakdown, server counters) as JSON to FILE");
  draw->callback([d] { run_draw(*d); });

  auto r = std::make_shared<RunOptions>();
  auto* run = lab.add_subcommand("run", "carry out a design: start the arms in the registered order, append the ledger");
  run->add_option("design", r->design, "design file (JSON)")->required();
  run->add_option("--ledger", r->ledger, "ledger file (JSONL, hash-chained); an existing one is resumed")->required();
  run->add_option("--logs", r->logs, "directory for engine logs (default: LEDGER.logs)");
  run->add_option("--start-timeout", r->start_timeout_s, "seconds an engine may take to become healthy")
      ->capture_default_str();
  run->add_option("--request-timeout", r->request_timeout_s, "seconds to wait for each read from an engine")
      ->capture_default_str();
  run->callback([r] { run_design(*r); });

  auto f = std::make_shared<FidelityCliOptions>();
  auto* fid = lab.add_subcommand("fidelity", "KL and top-1 agreement of engine B against engine A, with an A/A run");
  fid->add_option("--a", f->screen.a.start, "command that starts engine A (the reference); {port} = a free port")
      ->required();
  fid->add_option("--b", f->screen.b.start, "command that starts engine B (the candidate)")->required();
  fid->add_option("--a-url", f->screen.a.url, "engine A's base URL")->capture_default_str();
  fid->add_option("--b-url", f->screen.b.url, "engine B's base URL")->capture_default_str();
  fid->add_option("--health", f->screen.a.health, "health path of both engines")->capture_default_str();
  fid->add_option("--items", f->items, "reference prompts and forced-decode traces (JSONL)")->required();
  fid->add_option("--top", f->screen.top_k, "top-K log-probabilities per position")->capture_default_str()->check(
      CLI::Range(1, 1000));
  fid->add_option("--kl-margin", f->screen.kl_margin, "nats B's mean KL may exceed A/A's")->capture_default_str();
  fid->add_option("--top1-margin", f->screen.top1_margin, "how far B's top-1 agreement may fall below A/A's")
      ->capture_default_str();
  fid->add_option("--start-timeout", f->start_timeout_s, "seconds an engine may take to become healthy")
      ->capture_default_str();
  fid->add_option("--logs", f->logs, "directory for engine logs");
  fid->add_option("--json", f->json_out, "write the result as JSON to FILE");
  fid->callback([f] {
    f->screen.b.health = f->screen.a.health;
    run_fidelity(*f);
  });
}

}  // namespace frank::cli
