#include "frank/lab/object_reader.h"

#include <fmt/format.h>

#include "frank/core/error.h"

namespace frank::lab {

using nlohmann::json;

ObjectReader::ObjectReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
  if (!j.is_object()) throw Error(fmt::format("{}: must be a JSON object", path_.empty() ? "top level" : path_));
}

std::string ObjectReader::field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

const json& ObjectReader::required(const std::string& key) {
  seen_.insert(key);
  if (!j_.contains(key)) throw Error(fmt::format("{}: missing", field(key)));
  return j_.at(key);
}

std::string ObjectReader::string(const std::string& key) {
  const json& v = required(key);
  if (!v.is_string() || v.get<std::string>().empty())
    throw Error(fmt::format("{}: must be a non-empty string", field(key)));
  return v.get<std::string>();
}

std::string ObjectReader::string_or(const std::string& key, const std::string& fallback) {
  if (!has(key)) return fallback;
  const json& v = required(key);
  if (!v.is_string()) throw Error(fmt::format("{}: must be a string", field(key)));
  return v.get<std::string>();
}

double ObjectReader::number(const std::string& key) {
  const json& v = required(key);
  if (!v.is_number()) throw Error(fmt::format("{}: must be a number", field(key)));
  return v.get<double>();
}

double ObjectReader::number_or(const std::string& key, double fallback) { return has(key) ? number(key) : fallback; }

int64_t ObjectReader::integer(const std::string& key, int64_t lo, int64_t hi) {
  const json& v = required(key);
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    throw Error(fmt::format("{}: must be an integer in [{}, {}]", field(key), lo, hi));
  return v.get<int64_t>();
}

int64_t ObjectReader::integer_or(const std::string& key, int64_t lo, int64_t hi, int64_t fallback) {
  return has(key) ? integer(key, lo, hi) : fallback;
}

void ObjectReader::finish() const {
  for (const auto& [key, value] : j_.items())
    if (!seen_.count(key)) throw Error(fmt::format("{}: unknown field", field(key)));
}

}  // namespace frank::lab
