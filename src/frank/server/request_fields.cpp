#include "frank/server/request_fields.h"

namespace frank::server {

template <typename Json>
Json parse_body(const std::string& body, int max_depth) {
  Json j;
  try {
    // The callback sees every value with its depth; refusing deep nesting here keeps a hostile body
    // from costing unbounded stack or memory later.
    j = Json::parse(body, [max_depth](int depth, typename Json::parse_event_t, Json&) {
      if (depth > max_depth) throw ApiError(400, fmt::format("request body nests deeper than {} levels", max_depth));
      return true;
    });
  } catch (const nlohmann::json::exception& e) {
    throw ApiError(400, fmt::format("request body is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) throw ApiError(400, "request body must be a JSON object");
  return j;
}

template nlohmann::json parse_body<nlohmann::json>(const std::string&, int);
template nlohmann::ordered_json parse_body<nlohmann::ordered_json>(const std::string&, int);

std::vector<std::string> RequestFields::strings(const char* name, size_t max) const {
  if (!has(name)) return {};
  const auto& v = body_[name];
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array() || v.size() > max) fail(name, fmt::format("a string or a list of at most {} strings", max));
  std::vector<std::string> out;
  for (const auto& s : v) {
    if (!s.is_string()) fail(name, "a list of strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::vector<int32_t> RequestFields::token_ids(const char* name, int vocab) const {
  const auto& v = body_[name];
  if (!v.is_array()) fail(name, "a list of token ids");
  std::vector<int32_t> out;
  for (const auto& id : v) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab)
      fail(name, fmt::format("a list of token ids in [0, {})", vocab));
    out.push_back(id.get<int32_t>());
  }
  return out;
}

}  // namespace frank::server
