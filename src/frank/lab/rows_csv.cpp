#include "frank/lab/rows_csv.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <tuple>

#include "frank/core/error.h"

namespace frank::lab {
namespace {

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

std::vector<std::string> split_fields(const std::string& line, const std::string& origin) {
  if (line.find('"') != std::string::npos) throw Error(fmt::format("{}: quoted fields are not supported", origin));
  std::vector<std::string> fields;
  size_t begin = 0;
  for (;;) {
    const size_t comma = line.find(',', begin);
    fields.push_back(trim(line.substr(begin, comma - begin)));
    if (comma == std::string::npos) return fields;
    begin = comma + 1;
  }
}

int64_t parse_index(const std::string& field, const std::string& column, const std::string& origin) {
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec != std::errc() || end != field.data() + field.size() || v < 0)
    throw Error(fmt::format("{}: column {} must be an integer >= 0, got \"{}\"", origin, column, field));
  return v;
}

double parse_number(const std::string& field, const std::string& column, const std::string& origin) {
  double v = 0.0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec != std::errc() || end != field.data() + field.size() || !std::isfinite(v))
    throw Error(fmt::format("{}: column {} must be a finite number, got \"{}\"", origin, column, field));
  return v;
}

}  // namespace

std::vector<Row> read_rows_csv(const std::filesystem::path& path, const std::string& metric_name,
                               const std::string& covariate_name) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot open rows file '{}'", path.string()));
  std::string text;
  int64_t number = 0;
  bool have_header = false;
  while (!have_header && std::getline(in, text)) {
    ++number;
    have_header = !trim(text).empty();
  }
  if (!have_header) throw Error(fmt::format("{}: empty, expected a header line", path.string()));
  const std::vector<std::string> header = split_fields(text, fmt::format("{}:{}", path.string(), number));
  std::map<std::string, size_t> column;
  for (size_t i = 0; i < header.size(); ++i)
    if (!column.emplace(header[i], i).second || header[i].empty())
      throw Error(fmt::format("{}:{}: column names must be unique and non-empty", path.string(), number));
  for (const char* required : {"block", "arm", "value"})
    if (!column.count(required)) throw Error(fmt::format("{}: no column \"{}\"", path.string(), required));
  for (const std::string& name : {metric_name, covariate_name})
    if (!name.empty() && column.count(name))
      throw Error(
          fmt::format("{}: column \"{}\" clashes with \"value\"/\"covariate\", which hold it", path.string(), name));
  if (column.count("covariate") && covariate_name.empty())
    throw Error(fmt::format("{}: column \"covariate\" given, but the design declares no covariate", path.string()));

  std::vector<Row> rows;
  std::map<std::tuple<int64_t, std::string, int64_t>, int64_t> draws_seen;  // numbering without a draw column
  while (std::getline(in, text)) {
    ++number;
    if (trim(text).empty()) continue;
    const std::string origin = fmt::format("{}:{}", path.string(), number);
    const std::vector<std::string> fields = split_fields(text, origin);
    if (fields.size() != header.size())
      throw Error(fmt::format("{}: {} fields, the header has {}", origin, fields.size(), header.size()));
    Row row;
    row.origin = origin;
    for (size_t i = 0; i < header.size(); ++i) {
      const std::string& name = header[i];
      if (name == "block")
        row.block = parse_index(fields[i], name, origin);
      else if (name == "start")
        row.start = parse_index(fields[i], name, origin);
      else if (name == "draw")
        row.draw = parse_index(fields[i], name, origin);
      else if (name == "arm")
        row.arm = fields[i];
      else if (name == "value")
        row.metrics[metric_name] = parse_number(fields[i], name, origin);
      else if (name == "covariate")
        row.metrics[covariate_name] = parse_number(fields[i], name, origin);
      else
        row.metrics[name] = parse_number(fields[i], name, origin);
    }
    if (row.arm.empty()) throw Error(fmt::format("{}: empty arm", origin));
    const int64_t next_draw = draws_seen[{row.block, row.arm, row.start}]++;
    if (!column.count("draw")) row.draw = next_draw;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace frank::lab
