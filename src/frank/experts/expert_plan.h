#pragma once
// An expert plan names, per layer, the routed experts kept in CPU RAM; every other routed expert
// lives in GPU memory. Stored as JSON (schema in docs/expert-plans.md). A plan is validated
// completely when it is read, so a bad plan is refused at start with the offending field named.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace frank::experts {

inline constexpr int kPlanVersion = 1;
inline constexpr const char* kPlanFormat = "frank-expert-plan";

struct ExpertPlan {
  std::string model_fingerprint;
  uint32_t n_layers = 0;
  uint32_t n_experts = 0;
  std::vector<std::vector<uint16_t>> cpu_experts;  // [n_layers], each ascending, no repeats
  std::string description;                         // free text: how the plan was made

  size_t cpu_expert_count() const;
  // Flat mask over (layer, expert), index layer * n_experts + expert: true where CPU-homed.
  std::vector<bool> cpu_mask() const;
};

// Builds a plan from a flat CPU mask (index layer * n_experts + expert).
ExpertPlan plan_from_mask(std::string model_fingerprint, uint32_t n_layers, uint32_t n_experts,
                          const std::vector<bool>& cpu_mask, std::string description);

// Parses and validates. `expected_fingerprint` (empty: accept any) is the model the plan will be
// used with. Throws frank::Error naming `source` and the field that is wrong.
ExpertPlan parse_plan(const nlohmann::json& j, const std::string& expected_fingerprint, const std::string& source);
ExpertPlan load_plan(const std::string& path, const std::string& expected_fingerprint);

// One line per layer, so plans diff well in version control.
std::string format_plan(const ExpertPlan& plan);
void save_plan(const std::string& path, const ExpertPlan& plan);

}  // namespace frank::experts
