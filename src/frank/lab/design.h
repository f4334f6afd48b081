#pragma once
// An A/B design as registered before anything runs: two arms, randomized blocks (or a fixed
// sequence), the metric and its better direction, an optional fixed-slope covariate adjustment,
// the decision rule and the guards. docs/lab.md describes the file; parse_design validates it and
// throws frank::Error naming the field on anything wrong.
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace frank::lab {

inline constexpr const char* kDesignFormat = "frank-lab-design/1";

enum class Better { Lower, Higher };

struct Arm {
  std::string name;
  std::string start;   // shell command that starts the arm's server
  std::string url;     // base URL of its OpenAI-compatible API
  std::string health;  // path polled until the server is up, e.g. "/health"
};

struct Metric {
  std::string name;
  Better better = Better::Lower;
};

// Each draw is moved to a fixed covariate value before anything else:
//   adjusted = value - slope[arm] * (covariate - reference).
// The estimand says which of the two the decision uses; the analysis reports both.
struct Covariate {
  enum class Estimand { FixedCovariate, EndToEnd };
  std::string name;
  double reference = 0.0;
  std::map<std::string, double> slope;  // per arm
  Estimand estimand = Estimand::FixedCovariate;
};

// How the three-way verdict (adopt / reject / inconclusive) is reached; see decision.h.
struct DecisionRule {
  enum class Kind { AllBlocksBetter, SignTest, Permutation, Bands };
  Kind kind = Kind::AllBlocksBetter;
  double alpha = 0.05;                   // SignTest, Permutation
  double expected_improvement = 0.0;     // Bands: the relative improvement predicted before the run
  double adopt_if_lower_at_least = 0.5;  // Bands: fraction of expected_improvement
  double reject_if_upper_below = 0.5;    // Bands: fraction of expected_improvement
};

// Non-inferiority of the treatment on another metric the rows carry (e.g. a pass rate).
struct QualityGuard {
  enum class Scale { Absolute, Relative };
  std::string metric;
  Better better = Better::Higher;
  Scale scale = Scale::Absolute;
  double margin = 0.0;  // the largest worsening accepted (same units as the scale)
};

// The baseline arm must measure what it measured before (equivalence within the margin).
struct DriftGuard {
  double reference_mean = 0.0;      // the baseline's mean over earlier rows, in the primary estimand's units
  double max_relative_drift = 0.0;  // margin on baseline_now / reference_mean - 1
};

struct Design {
  std::string name;
  std::string description;
  std::vector<Arm> arms;  // exactly two
  std::string baseline;   // name of the baseline arm; the other is the treatment
  int64_t blocks = 0;
  int64_t starts_per_arm = 1;  // per block
  int64_t draws_per_start = 1;
  nlohmann::json workload;  // object with "name"; the other keys belong to the runner
  Metric metric;
  std::optional<Covariate> covariate;
  DecisionRule decision;
  std::vector<QualityGuard> quality_guards;
  std::optional<DriftGuard> drift_guard;
  // A fixed start order per block instead of the hash-derived one: each entry names every arm
  // starts_per_arm times.
  std::optional<std::vector<std::vector<std::string>>> sequence;
  int64_t monte_carlo_samples = 100000;  // permutation test above kMaxExactAssignments

  const std::string& treatment() const { return arms[0].name == baseline ? arms[1].name : arms[0].name; }
  bool uses_covariate_adjustment() const {
    return covariate && covariate->estimand == Covariate::Estimand::FixedCovariate;
  }
};

Design parse_design(const nlohmann::json& j);
Design load_design(const std::filesystem::path& path);
// Every field explicit (defaults filled in): the registered form that is hashed.
nlohmann::json design_to_json(const Design& d);

const char* to_string(Better b);

}  // namespace frank::lab
