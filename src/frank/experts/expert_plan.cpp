#include "frank/experts/expert_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "frank/core/error.h"

namespace frank::experts {
namespace {

using nlohmann::json;

class PlanParser {
 public:
  PlanParser(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  ExpertPlan parse(const std::string& expected_fingerprint) {
    if (!j_.is_object()) fail("", "a plan must be a JSON object");
    for (const auto& [key, value] : j_.items())
      if (key != "format" && key != "version" && key != "model_fingerprint" && key != "n_layers" &&
          key != "n_experts" && key != "cpu_expert_count" && key != "layers" && key != "description")
        fail(key, "unknown key");
    if (text("format") != kPlanFormat) fail("format", fmt::format("must be \"{}\"", kPlanFormat));
    const int64_t version = integer(j_, "version", "version");
    if (version != kPlanVersion)
      fail("version", fmt::format("unsupported plan version {} (this frank reads version {})", version, kPlanVersion));

    ExpertPlan plan;
    plan.model_fingerprint = text("model_fingerprint");
    if (!expected_fingerprint.empty() && plan.model_fingerprint != expected_fingerprint)
      fail("model_fingerprint",
           fmt::format("the plan is for '{}' but the model is '{}'", plan.model_fingerprint, expected_fingerprint));
    if (j_.contains("description")) plan.description = text("description");
    plan.n_layers = static_cast<uint32_t>(in_range(integer(j_, "n_layers", "n_layers"), 1, 1 << 16, "n_layers"));
    plan.n_experts = static_cast<uint32_t>(in_range(integer(j_, "n_experts", "n_experts"), 1, 65536, "n_experts"));
    plan.cpu_experts.assign(plan.n_layers, {});
    parse_layers(plan);

    const int64_t declared = integer(j_, "cpu_expert_count", "cpu_expert_count");
    if (declared < 0 || static_cast<size_t>(declared) != plan.cpu_expert_count())
      fail("cpu_expert_count",
           fmt::format("says {} but the layers list {} CPU experts", declared, plan.cpu_expert_count()));
    return plan;
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& message) const {
    if (field.empty()) throw Error(fmt::format("expert plan '{}': {}", source_, message));
    throw Error(fmt::format("expert plan '{}': {}: {}", source_, field, message));
  }

  const json& member(const json& object, const char* key, const std::string& field) const {
    if (!object.contains(key)) fail(field, "missing");
    return object.at(key);
  }

  std::string text(const char* key) const {
    const json& v = member(j_, key, key);
    if (!v.is_string()) fail(key, "must be a string");
    return v.get<std::string>();
  }

  int64_t integer(const json& value, const std::string& field) const {
    if (!value.is_number_integer()) fail(field, "must be an integer");
    return value.get<int64_t>();
  }
  int64_t integer(const json& object, const char* key, const std::string& field) const {
    return integer(member(object, key, field), field);
  }

  int64_t in_range(int64_t v, int64_t lo, int64_t hi, const std::string& field) const {
    if (v < lo || v > hi) fail(field, fmt::format("{} is not in {}..{}", v, lo, hi));
    return v;
  }

  void parse_layers(ExpertPlan& plan) const {
    const json& layers = member(j_, "layers", "layers");
    if (!layers.is_array()) fail("layers", "must be an array");
    std::map<int64_t, size_t> entry_of_layer;
    for (size_t i = 0; i < layers.size(); ++i) {
      const std::string where = fmt::format("layers[{}]", i);
      const json& entry = layers[i];
      if (!entry.is_object()) fail(where, "must be an object");
      for (const auto& [key, value] : entry.items())
        if (key != "layer" && key != "cpu_experts") fail(fmt::format("{}.{}", where, key), "unknown key");
      const int64_t layer = integer(entry, "layer", where + ".layer");
      if (layer < 0 || layer >= plan.n_layers)
        fail(where + ".layer", fmt::format("unknown layer {} (the model has {} layers)", layer, plan.n_layers));
      if (auto [it, fresh] = entry_of_layer.emplace(layer, i); !fresh)
        fail(where + ".layer", fmt::format("layer {} is listed twice (also in layers[{}])", layer, it->second));

      const json& ids = member(entry, "cpu_experts", where + ".cpu_experts");
      if (!ids.is_array()) fail(where + ".cpu_experts", "must be an array");
      std::vector<bool> seen(plan.n_experts, false);
      auto& cpu = plan.cpu_experts[static_cast<size_t>(layer)];
      for (size_t k = 0; k < ids.size(); ++k) {
        const std::string field = fmt::format("{}.cpu_experts[{}]", where, k);
        const int64_t e = integer(ids[k], field);
        if (e < 0 || e >= plan.n_experts)
          fail(field, fmt::format("unknown expert {} (layers have {} experts)", e, plan.n_experts));
        if (seen[static_cast<size_t>(e)]) fail(field, fmt::format("expert {} is listed twice in layer {}", e, layer));
        seen[static_cast<size_t>(e)] = true;
        cpu.push_back(static_cast<uint16_t>(e));
      }
      std::sort(cpu.begin(), cpu.end());
    }
  }

  const json& j_;
  std::string source_;
};

}  // namespace

size_t ExpertPlan::cpu_expert_count() const {
  size_t n = 0;
  for (const auto& layer : cpu_experts) n += layer.size();
  return n;
}

std::vector<bool> ExpertPlan::cpu_mask() const {
  std::vector<bool> mask(size_t{n_layers} * n_experts, false);
  for (size_t l = 0; l < cpu_experts.size(); ++l)
    for (uint16_t e : cpu_experts[l]) mask[l * n_experts + e] = true;
  return mask;
}

ExpertPlan plan_from_mask(std::string model_fingerprint, uint32_t n_layers, uint32_t n_experts,
                          const std::vector<bool>& cpu_mask, std::string description) {
  ExpertPlan plan{std::move(model_fingerprint), n_layers, n_experts, {}, std::move(description)};
  plan.cpu_experts.assign(n_layers, {});
  for (uint32_t l = 0; l < n_layers; ++l)
    for (uint32_t e = 0; e < n_experts; ++e)
      if (cpu_mask[size_t{l} * n_experts + e]) plan.cpu_experts[l].push_back(static_cast<uint16_t>(e));
  return plan;
}

ExpertPlan parse_plan(const nlohmann::json& j, const std::string& expected_fingerprint, const std::string& source) {
  return PlanParser(j, source).parse(expected_fingerprint);
}

ExpertPlan load_plan(const std::string& path, const std::string& expected_fingerprint) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot open expert plan '{}'", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(fmt::format("expert plan '{}' is not valid JSON: {}", path, e.what()));
  }
  return parse_plan(j, expected_fingerprint, path);
}

std::string format_plan(const ExpertPlan& plan) {
  std::ostringstream out;
  out << "{\n";
  out << "  \"format\": " << nlohmann::json(kPlanFormat).dump() << ",\n";
  out << "  \"version\": " << kPlanVersion << ",\n";
  if (!plan.description.empty()) out << "  \"description\": " << nlohmann::json(plan.description).dump() << ",\n";
  out << "  \"model_fingerprint\": " << nlohmann::json(plan.model_fingerprint).dump() << ",\n";
  out << "  \"n_layers\": " << plan.n_layers << ",\n";
  out << "  \"n_experts\": " << plan.n_experts << ",\n";
  out << "  \"cpu_expert_count\": " << plan.cpu_expert_count() << ",\n";
  out << "  \"layers\": [";
  for (size_t l = 0; l < plan.cpu_experts.size(); ++l) {
    const nlohmann::ordered_json entry = {{"layer", l}, {"cpu_experts", plan.cpu_experts[l]}};
    out << (l ? ",\n    " : "\n    ") << entry.dump();
  }
  out << "\n  ]\n}\n";
  return out.str();
}

void save_plan(const std::string& path, const ExpertPlan& plan) {
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("cannot open '{}' for writing", path));
  out << format_plan(plan);
  out.close();
  if (!out) throw Error(fmt::format("writing expert plan '{}' failed", path));
}

}  // namespace frank::experts
