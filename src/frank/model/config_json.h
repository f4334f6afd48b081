#pragma once
// Typed config.json field access with frank::Error messages that name the field; shared by the
// V4 and V4.1 config parsers.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "frank/core/error.h"

namespace frank::model::config_json {

// The value of `key`, or `fallback` when it is absent or null.
template <typename T>
T get_or(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("config.json: field '{}' has the wrong type ({})", key, it->dump()));
  }
}

inline int positive(const nlohmann::json& j, const char* key, int fallback) {
  const int v = get_or<int>(j, key, fallback);
  if (v <= 0) throw Error(fmt::format("config.json: field '{}' must be positive, got {}", key, v));
  return v;
}

}  // namespace frank::model::config_json
