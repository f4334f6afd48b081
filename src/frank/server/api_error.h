#pragma once
// An error answered to an HTTP client in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}} with the matching status.
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace frank::server {

// JSON text for a client. Bytes that are not UTF-8 (a client may send them inside a string; nlohmann
// only checks when writing) become U+FFFD instead of an exception.
template <typename Json>
std::string json_text(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// One server-sent event carrying a JSON document.
template <typename Json>
std::string sse_event(const Json& j) {
  return "data: " + json_text(j) + "\n\n";
}

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status(status), param(std::move(param)), code(std::move(code)) {}

  int status;
  std::string param;
  std::string code;

  std::string type() const {
    switch (status) {
      case 401: return "authentication_error";
      case 404: return "not_found_error";
      case 429: return "rate_limit_error";
      case 500: return "server_error";
      default: return "invalid_request_error";
    }
  }
  nlohmann::json body() const {
    return {{"error",
             {{"message", what()},
              {"type", type()},
              {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
              {"code", code.empty() ? nlohmann::json() : nlohmann::json(code)}}}};
  }
};

}  // namespace frank::server
