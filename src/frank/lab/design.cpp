#include "frank/lab/design.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>

#include "frank/core/error.h"
#include "frank/lab/minimum_p.h"
#include "frank/lab/object_reader.h"

namespace frank::lab {
namespace {

using nlohmann::json;

constexpr int64_t kMaxBlocks = 1000;     // the exact sign test sums C(n, i) in double up to here
constexpr int64_t kMaxStartsPerArm = 8;  // C(16, 8) = 12870 assignments per block at most

Better parse_better(ObjectReader& r, const std::string& key) {
  const std::string s = r.string(key);
  if (s == "lower") return Better::Lower;
  if (s == "higher") return Better::Higher;
  throw Error(fmt::format("{}: must be \"lower\" or \"higher\", got \"{}\"", r.field(key), s));
}

bool is_arm_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

Arm parse_arm(const json& j, const std::string& path) {
  ObjectReader r(j, path);
  Arm arm{r.string("name"), r.string("start"), r.string("url"), r.string("health")};
  r.finish();
  if (!is_arm_name(arm.name))
    throw Error(fmt::format("{}: \"{}\" must use only letters, digits, '_', '-' and '.'", r.field("name"), arm.name));
  if (!arm.url.starts_with("http://") && !arm.url.starts_with("https://"))
    throw Error(fmt::format("{}: \"{}\" must start with http:// or https://", r.field("url"), arm.url));
  if (!arm.health.starts_with("/"))
    throw Error(fmt::format("{}: \"{}\" must be a path starting with '/'", r.field("health"), arm.health));
  return arm;
}

std::vector<Arm> parse_arms(ObjectReader& r) {
  const json& j = r.required("arms");
  if (!j.is_array() || j.size() != 2) throw Error("arms: must list exactly two arms (a baseline and a treatment)");
  std::vector<Arm> arms;
  for (size_t i = 0; i < j.size(); ++i) arms.push_back(parse_arm(j[i], fmt::format("arms[{}]", i)));
  if (arms[0].name == arms[1].name) throw Error(fmt::format("arms: both arms are named \"{}\"", arms[0].name));
  return arms;
}

Metric parse_metric(const json& j) {
  ObjectReader r(j, "metric");
  Metric m{r.string("name"), parse_better(r, "better")};
  r.finish();
  return m;
}

Covariate parse_covariate(const json& j, const std::vector<Arm>& arms) {
  ObjectReader r(j, "covariate");
  Covariate c;
  c.name = r.string("name");
  c.reference = r.number("reference");
  const json& slope = r.required("slope");
  if (slope.is_number()) {
    for (const Arm& arm : arms) c.slope[arm.name] = slope.get<double>();
  } else if (slope.is_object()) {
    ObjectReader s(slope, "covariate.slope");
    for (const Arm& arm : arms) c.slope[arm.name] = s.number(arm.name);
    s.finish();
  } else {
    throw Error("covariate.slope: must be a number (every arm) or an object with one number per arm");
  }
  const std::string estimand = r.string("estimand");
  if (estimand == "fixed_covariate")
    c.estimand = Covariate::Estimand::FixedCovariate;
  else if (estimand == "end_to_end")
    c.estimand = Covariate::Estimand::EndToEnd;
  else
    throw Error(fmt::format("covariate.estimand: must be \"fixed_covariate\" or \"end_to_end\", got \"{}\"", estimand));
  r.finish();
  return c;
}

DecisionRule parse_decision(const json& j) {
  ObjectReader r(j, "decision");
  DecisionRule d;
  const std::string kind = r.string("kind");
  if (kind == "all_blocks_better") {
    d.kind = DecisionRule::Kind::AllBlocksBetter;
  } else if (kind == "sign_test" || kind == "permutation") {
    d.kind = kind == "sign_test" ? DecisionRule::Kind::SignTest : DecisionRule::Kind::Permutation;
    d.alpha = r.number("alpha");
    if (!(d.alpha > 0.0 && d.alpha < 1.0))
      throw Error(fmt::format("decision.alpha: must be in (0, 1), got {}", d.alpha));
  } else if (kind == "bands") {
    d.kind = DecisionRule::Kind::Bands;
    d.expected_improvement = r.number("expected_improvement");
    d.adopt_if_lower_at_least = r.number_or("adopt_if_lower_at_least", d.adopt_if_lower_at_least);
    d.reject_if_upper_below = r.number_or("reject_if_upper_below", d.reject_if_upper_below);
    if (!(d.expected_improvement > 0.0))
      throw Error(fmt::format("decision.expected_improvement: must be > 0, got {}", d.expected_improvement));
    if (!(d.adopt_if_lower_at_least >= 0.0))
      throw Error(fmt::format("decision.adopt_if_lower_at_least: must be >= 0, got {}", d.adopt_if_lower_at_least));
    if (!(d.reject_if_upper_below >= 0.0 && d.reject_if_upper_below <= d.adopt_if_lower_at_least))
      throw Error(fmt::format(
          "decision.reject_if_upper_below: must be in [0, adopt_if_lower_at_least = {}] so the bands cannot overlap, "
          "got {}",
          d.adopt_if_lower_at_least, d.reject_if_upper_below));
  } else {
    throw Error(fmt::format(
        "decision.kind: must be \"all_blocks_better\", \"sign_test\", \"permutation\" or \"bands\", got \"{}\"", kind));
  }
  r.finish();
  return d;
}

QualityGuard parse_quality_guard(const json& j, const std::string& path) {
  ObjectReader r(j, path);
  QualityGuard g;
  g.metric = r.string("metric");
  g.better = parse_better(r, "better");
  const std::string scale = r.string("scale");
  if (scale == "absolute")
    g.scale = QualityGuard::Scale::Absolute;
  else if (scale == "relative")
    g.scale = QualityGuard::Scale::Relative;
  else
    throw Error(fmt::format("{}: must be \"absolute\" or \"relative\", got \"{}\"", r.field("scale"), scale));
  g.margin = r.number("margin");
  if (!(g.margin >= 0.0)) throw Error(fmt::format("{}: must be >= 0, got {}", r.field("margin"), g.margin));
  r.finish();
  return g;
}

DriftGuard parse_drift_guard(const json& j) {
  ObjectReader r(j, "drift_guard");
  DriftGuard g{r.number("reference_mean"), r.number("max_relative_drift")};
  r.finish();
  if (!(g.reference_mean > 0.0))
    throw Error(fmt::format("drift_guard.reference_mean: must be > 0, got {}", g.reference_mean));
  if (!(g.max_relative_drift > 0.0))
    throw Error(fmt::format("drift_guard.max_relative_drift: must be > 0, got {}", g.max_relative_drift));
  return g;
}

std::vector<std::vector<std::string>> parse_sequence(const json& j, const Design& d) {
  if (!j.is_array() || j.empty() || j.size() > size_t(kMaxBlocks))
    throw Error(fmt::format("sequence: must be a list of 1 to {} blocks", kMaxBlocks));
  std::vector<std::vector<std::string>> sequence;
  for (size_t b = 0; b < j.size(); ++b) {
    const json& block = j[b];
    if (!block.is_array() || !std::all_of(block.begin(), block.end(), [](const json& s) { return s.is_string(); }))
      throw Error(fmt::format("sequence[{}]: must be a list of arm names", b));
    std::vector<std::string> order = block.get<std::vector<std::string>>();
    for (const std::string& name : order)
      if (name != d.arms[0].name && name != d.arms[1].name)
        throw Error(fmt::format("sequence[{}]: unknown arm \"{}\"", b, name));
    for (const Arm& arm : d.arms)
      if (std::count(order.begin(), order.end(), arm.name) != d.starts_per_arm)
        throw Error(fmt::format("sequence[{}]: must start arm \"{}\" exactly starts_per_arm = {} times", b, arm.name,
                                d.starts_per_arm));
    sequence.push_back(std::move(order));
  }
  return sequence;
}

// Checks that involve several fields: the rule must be able to reach its alpha, and the intervals
// behind bands and guards need at least two blocks.
void check_consistency(const Design& d) {
  if (d.decision.kind == DecisionRule::Kind::SignTest && sign_test_minimum_p(d.blocks) > d.decision.alpha)
    throw Error(fmt::format("decision.alpha: {} blocks cannot reach p <= {} with the sign test (smallest p {})",
                            d.blocks, d.decision.alpha, sign_test_minimum_p(d.blocks)));
  const double min_perm = permutation_minimum_p(d.blocks, d.starts_per_arm, d.monte_carlo_samples);
  if (d.decision.kind == DecisionRule::Kind::Permutation && min_perm > d.decision.alpha)
    throw Error(fmt::format("decision.alpha: {} blocks cannot reach p <= {} with the permutation test (smallest p {})",
                            d.blocks, d.decision.alpha, min_perm));
  if (d.blocks < 2) {
    if (d.decision.kind == DecisionRule::Kind::Bands)
      throw Error("decision: bands need an interval, so at least 2 blocks");
    if (!d.quality_guards.empty()) throw Error("quality_guards: need an interval, so at least 2 blocks");
    if (d.drift_guard) throw Error("drift_guard: needs an interval, so at least 2 blocks");
  }
  std::set<std::string> names = {d.metric.name};
  if (d.covariate && !names.insert(d.covariate->name).second)
    throw Error(fmt::format("covariate.name: \"{}\" is already the metric", d.covariate->name));
  for (size_t i = 0; i < d.quality_guards.size(); ++i)
    if (!names.insert(d.quality_guards[i].metric).second)
      throw Error(
          fmt::format("quality_guards[{}].metric: \"{}\" is already used by the metric, covariate or another "
                      "guard",
                      i, d.quality_guards[i].metric));
}

}  // namespace

const char* to_string(Better b) { return b == Better::Lower ? "lower" : "higher"; }

Design parse_design(const json& j) {
  ObjectReader r(j, "");
  const std::string format = r.string("format");
  if (format != kDesignFormat) throw Error(fmt::format("format: must be \"{}\", got \"{}\"", kDesignFormat, format));
  Design d;
  d.name = r.string("name");
  d.description = r.string_or("description", "");
  d.arms = parse_arms(r);
  d.baseline = r.string("baseline");
  if (d.baseline != d.arms[0].name && d.baseline != d.arms[1].name)
    throw Error(fmt::format("baseline: \"{}\" is not one of the arms", d.baseline));
  d.starts_per_arm = r.integer_or("starts_per_arm", 1, kMaxStartsPerArm, 1);
  d.draws_per_start = r.integer("draws_per_start", 1, 1000000);
  if (r.has("sequence")) {
    d.sequence = parse_sequence(r.required("sequence"), d);
    d.blocks = static_cast<int64_t>(d.sequence->size());
    if (r.has("blocks") && r.integer("blocks", 1, kMaxBlocks) != d.blocks)
      throw Error(fmt::format("blocks: must equal the length of sequence ({})", d.blocks));
  } else {
    d.blocks = r.integer("blocks", 1, kMaxBlocks);
  }
  d.workload = r.required("workload");
  ObjectReader workload(d.workload, "workload");
  workload.string("name");  // the runner reads the other keys
  d.metric = parse_metric(r.required("metric"));
  if (r.has("covariate")) d.covariate = parse_covariate(r.required("covariate"), d.arms);
  d.decision = parse_decision(r.required("decision"));
  if (r.has("quality_guards")) {
    const json& guards = r.required("quality_guards");
    if (!guards.is_array()) throw Error("quality_guards: must be a list");
    for (size_t i = 0; i < guards.size(); ++i)
      d.quality_guards.push_back(parse_quality_guard(guards[i], fmt::format("quality_guards[{}]", i)));
  }
  if (r.has("drift_guard")) d.drift_guard = parse_drift_guard(r.required("drift_guard"));
  d.monte_carlo_samples = r.integer_or("monte_carlo_samples", 1000, 100000000, d.monte_carlo_samples);
  r.finish();
  check_consistency(d);
  return d;
}

Design load_design(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot open design file '{}'", path.string()));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw Error(fmt::format("design file '{}' is not valid JSON: {}", path.string(), e.what()));
  }
  try {
    return parse_design(j);
  } catch (const Error& e) {
    throw Error(fmt::format("design file '{}': {}", path.string(), e.what()));
  }
}

json design_to_json(const Design& d) {
  json j;
  j["format"] = kDesignFormat;
  j["name"] = d.name;
  j["description"] = d.description;
  j["arms"] = json::array();
  for (const Arm& a : d.arms)
    j["arms"].push_back({{"name", a.name}, {"start", a.start}, {"url", a.url}, {"health", a.health}});
  j["baseline"] = d.baseline;
  j["blocks"] = d.blocks;
  j["starts_per_arm"] = d.starts_per_arm;
  j["draws_per_start"] = d.draws_per_start;
  j["workload"] = d.workload;
  j["metric"] = {{"name", d.metric.name}, {"better", to_string(d.metric.better)}};
  if (d.covariate) {
    const Covariate& c = *d.covariate;
    j["covariate"] = {
        {"name", c.name},
        {"reference", c.reference},
        {"slope", c.slope},
        {"estimand", c.estimand == Covariate::Estimand::FixedCovariate ? "fixed_covariate" : "end_to_end"}};
  }
  const DecisionRule& r = d.decision;
  switch (r.kind) {
    case DecisionRule::Kind::AllBlocksBetter: j["decision"] = {{"kind", "all_blocks_better"}}; break;
    case DecisionRule::Kind::SignTest: j["decision"] = {{"kind", "sign_test"}, {"alpha", r.alpha}}; break;
    case DecisionRule::Kind::Permutation: j["decision"] = {{"kind", "permutation"}, {"alpha", r.alpha}}; break;
    case DecisionRule::Kind::Bands:
      j["decision"] = {{"kind", "bands"},
                       {"expected_improvement", r.expected_improvement},
                       {"adopt_if_lower_at_least", r.adopt_if_lower_at_least},
                       {"reject_if_upper_below", r.reject_if_upper_below}};
      break;
  }
  j["quality_guards"] = json::array();
  for (const QualityGuard& g : d.quality_guards)
    j["quality_guards"].push_back({{"metric", g.metric},
                                   {"better", to_string(g.better)},
                                   {"scale", g.scale == QualityGuard::Scale::Absolute ? "absolute" : "relative"},
                                   {"margin", g.margin}});
  if (d.drift_guard)
    j["drift_guard"] = {{"reference_mean", d.drift_guard->reference_mean},
                        {"max_relative_drift", d.drift_guard->max_relative_drift}};
  if (d.sequence) j["sequence"] = *d.sequence;
  j["monte_carlo_samples"] = d.monte_carlo_samples;
  return j;
}

}  // namespace frank::lab
