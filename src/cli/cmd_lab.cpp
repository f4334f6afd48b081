// `frank lab`: pre-registered A/B designs. `register` fixes a design before anything runs (its
// id, the start order of every block, the smallest reachable p and, given earlier rows, the
// detectable effect); `analyze` turns its rows into tests, intervals and a verdict (as text, JSON
// or an HTML page with plots).
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "commands.h"
#include "frank/core/error.h"
#include "frank/lab/analysis.h"
#include "frank/lab/analysis_json.h"
#include "frank/lab/design.h"
#include "frank/lab/html_report.h"
#include "frank/lab/ledger.h"
#include "frank/lab/power.h"
#include "frank/lab/registration.h"
#include "frank/lab/report.h"
#include "frank/lab/rows_csv.h"

namespace frank::cli {
namespace {

struct RegisterOptions {
  std::string design;
  std::string out;
  std::string baseline_rows;
};

struct AnalyzeOptions {
  std::string design;
  std::string ledger;
  std::string rows;
  std::string json_out;
  std::string html_out;
};

std::string covariate_name(const lab::Design& d) { return d.covariate ? d.covariate->name : ""; }

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(fmt::format("cannot open '{}' for writing", path));
  out << text;
  if (!out) throw Error(fmt::format("writing '{}' failed", path));
}

void run_register(const RegisterOptions& o) {
  const lab::Design design = lab::load_design(o.design);
  const lab::Registration registration = lab::register_design(design);
  std::optional<lab::NoiseEstimate> noise;
  if (!o.baseline_rows.empty())
    noise =
        lab::estimate_noise(lab::read_rows_csv(o.baseline_rows, design.metric.name, covariate_name(design)), design);
  // No trailing newline: `sha256sum FILE` then prints the design id.
  if (!o.out.empty()) write_file(o.out, registration.canonical);
  std::cout << lab::registration_report(design, registration, noise);
}

void run_analyze(const AnalyzeOptions& o) {
  const lab::Design design = lab::load_design(o.design);
  const std::string id = lab::design_id(design);
  const auto rows = o.ledger.empty() ? lab::read_rows_csv(o.rows, design.metric.name, covariate_name(design))
                                     : lab::read_ledger(o.ledger, id);
  const lab::Analysis analysis = lab::analyze(design, id, rows);
  if (!o.json_out.empty()) write_file(o.json_out, lab::analysis_to_json(design, analysis).dump(2) + "\n");
  if (!o.html_out.empty()) write_file(o.html_out, lab::analysis_html(design, analysis, rows));
  std::cout << lab::analysis_report(design, analysis);
}

}  // namespace

void register_lab(CLI::App& app) {
  auto* lab = app.add_subcommand("lab", "pre-registered randomized A/B tests");
  lab->require_subcommand(1);

  auto reg = std::make_shared<RegisterOptions>();
  auto* reg_cmd =
      lab->add_subcommand("register", "hash a design and print its arm order, smallest p and detectable effect");
  reg_cmd->add_option("design", reg->design, "design file (JSON)")->required();
  reg_cmd->add_option("--out", reg->out, "write the canonical design (the hashed text) to FILE");
  reg_cmd->add_option(
      "--baseline-rows", reg->baseline_rows,
      "CSV of earlier rows of the metric (block,arm,value[,start][,covariate]) for the detectable effect");
  reg_cmd->callback([reg] { run_register(*reg); });

  auto an = std::make_shared<AnalyzeOptions>();
  auto* an_cmd = lab->add_subcommand("analyze", "tests, intervals and the verdict of a design's rows");
  an_cmd->add_option("--design", an->design, "design file (JSON)")->required();
  auto* ledger = an_cmd->add_option("--ledger", an->ledger, "ledger (JSONL rows of this design)");
  auto* rows =
      an_cmd->add_option("--rows", an->rows, "CSV rows: block,arm,value[,start][,draw][,covariate][,guard metrics]");
  ledger->excludes(rows);
  rows->excludes(ledger);
  an_cmd->add_option("--json", an->json_out, "write the analysis as JSON to FILE");
  an_cmd->add_option("--html", an->html_out, "write the analysis as a self-contained HTML page with plots to FILE");
  an_cmd->callback([an] {
    if (an->ledger.empty() && an->rows.empty()) throw Error("lab analyze: give --ledger FILE or --rows CSV");
    run_analyze(*an);
  });
  register_lab_engines(*lab);
}

}  // namespace frank::cli
