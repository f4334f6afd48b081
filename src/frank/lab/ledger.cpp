#include "frank/lab/ledger.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "frank/core/error.h"
#include "frank/lab/ledger_writer.h"

namespace frank::lab {
namespace {

using nlohmann::json;

int64_t non_negative_integer(const json& line, const char* key, const std::string& origin) {
  if (!line.contains(key) || !line.at(key).is_number_integer() || line.at(key).get<int64_t>() < 0)
    throw Error(fmt::format("{}: \"{}\" must be an integer >= 0", origin, key));
  return line.at(key).get<int64_t>();
}

Row parse_row(const json& line, const std::string& design_id, const std::string& origin) {
  if (!line.is_object()) throw Error(fmt::format("{}: a ledger row must be a JSON object", origin));
  if (!line.contains("design") || !line.at("design").is_string())
    throw Error(fmt::format("{}: \"design\" must be the design id", origin));
  const std::string design = line.at("design").get<std::string>();
  if (design != design_id)
    throw Error(fmt::format("{}: row of design {}, not of the registered design {}", origin, design, design_id));
  Row row;
  row.origin = origin;
  row.block = non_negative_integer(line, "block", origin);
  row.start = non_negative_integer(line, "start", origin);
  row.draw = non_negative_integer(line, "draw", origin);
  if (!line.contains("arm") || !line.at("arm").is_string())
    throw Error(fmt::format("{}: \"arm\" must be a string", origin));
  row.arm = line.at("arm").get<std::string>();
  if (!line.contains("metrics") || !line.at("metrics").is_object())
    throw Error(fmt::format("{}: \"metrics\" must be an object of numbers", origin));
  for (const auto& [name, value] : line.at("metrics").items()) {
    if (!value.is_number()) throw Error(fmt::format("{}: metric \"{}\" must be a number", origin, name));
    row.metrics[name] = value.get<double>();
  }
  return row;
}

}  // namespace

std::vector<Row> read_ledger(const std::filesystem::path& path, const std::string& design_id) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot open ledger '{}'", path.string()));
  std::vector<Row> rows;
  std::string text;
  bool chained = false;
  for (int64_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string origin = fmt::format("{}:{}", path.string(), number);
    json line;
    try {
      line = json::parse(text);
    } catch (const json::parse_error& e) {
      throw Error(fmt::format("{}: not valid JSON: {}", origin, e.what()));
    }
    chained = chained || (line.is_object() && line.contains("prev"));
    // The runner's event lines (engine started, crashed, ...) are not measurements.
    if (line.is_object() && line.contains("kind") && line.at("kind") != "draw") {
      if (line.value("design", design_id) != design_id)
        throw Error(fmt::format("{}: line of design {}, not of the registered design {}", origin,
                                line.value("design", ""), design_id));
      continue;
    }
    rows.push_back(parse_row(line, design_id, origin));
  }
  if (chained) read_chained_ledger(path);  // throws at the first line that breaks the hash chain
  return rows;
}

}  // namespace frank::lab
