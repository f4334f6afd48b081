#pragma once
// Typed access to the fields of a JSON request body; a missing, mistyped or out-of-range field is
// an ApiError 400 naming the field.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "frank/server/api_error.h"

namespace frank::server {

// Parses a request body: malformed JSON, a non-object or nesting deeper than `max_depth` is a 400.
// Chat requests use ordered_json: the key order of tool schemas is part of the prompt.
template <typename Json = nlohmann::json>
Json parse_body(const std::string& body, int max_depth = 64);

class RequestFields {
 public:
  explicit RequestFields(const nlohmann::json& body) : body_(body) {}

  bool has(const char* name) const { return body_.contains(name) && !body_[name].is_null(); }
  const nlohmann::json& raw(const char* name) const { return body_[name]; }

  template <typename T>
  T get(const char* name, T fallback) const {
    if (!has(name)) return fallback;
    const auto& v = body_[name];
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) fail(name, "a boolean");
    } else if constexpr (std::is_integral_v<T>) {
      if (!v.is_number_integer()) fail(name, "an integer");
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) fail(name, "a number");
    } else {
      if (!v.is_string()) fail(name, "a string");
    }
    return v.get<T>();
  }

  template <typename T>
  T get_in_range(const char* name, T fallback, T lo, T hi) const {
    const T v = get<T>(name, fallback);
    if (!(v >= lo && v <= hi)) throw ApiError(400, fmt::format("'{}' must be between {} and {}", name, lo, hi), name);
    return v;
  }

  // A string or a list of up to `max` strings (OpenAI's `stop`).
  std::vector<std::string> strings(const char* name, size_t max) const;
  // A list of token ids within [0, vocab).
  std::vector<int32_t> token_ids(const char* name, int vocab) const;

  [[noreturn]] static void fail(const std::string& name, const std::string& what) {
    throw ApiError(400, fmt::format("'{}' must be {}", name, what), name);
  }

 private:
  const nlohmann::json& body_;
};

}  // namespace frank::server
