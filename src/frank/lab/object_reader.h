#pragma once
// Strict reading of one JSON object, field by field, for the lab's files. `path` names the object
// in errors ("decision" -> "decision.alpha: must be a number"; "" is the top level), and finish()
// refuses keys nobody asked for, so a misspelt field is an error, not a silent default.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace frank::lab {

class ObjectReader {
 public:
  ObjectReader(const nlohmann::json& j, std::string path);  // throws frank::Error unless j is an object

  std::string field(const std::string& key) const;  // "path.key", for error messages
  bool has(const std::string& key) const { return j_.contains(key); }

  const nlohmann::json& required(const std::string& key);
  std::string string(const std::string& key);  // non-empty
  std::string string_or(const std::string& key, const std::string& fallback);
  double number(const std::string& key);
  double number_or(const std::string& key, double fallback);
  int64_t integer(const std::string& key, int64_t lo, int64_t hi);
  int64_t integer_or(const std::string& key, int64_t lo, int64_t hi, int64_t fallback);

  void finish() const;  // throws on the first key no accessor asked for

 private:
  const nlohmann::json& j_;
  std::string path_;
  std::set<std::string> seen_;
};

}  // namespace frank::lab
