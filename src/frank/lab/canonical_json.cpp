#include "frank/lab/canonical_json.h"

#include "frank/model/python_json.h"

namespace frank::lab {
namespace {

void write(const nlohmann::json& value, std::string& out) {
  switch (value.type()) {
    case nlohmann::json::value_t::object: {
      // nlohmann::json keeps object keys in a std::map<std::string>: already in byte order.
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) out += ',';
        first = false;
        out += model::python_json_string(key);
        out += ':';
        write(item, out);
      }
      out += '}';
      break;
    }
    case nlohmann::json::value_t::array:
      out += '[';
      for (size_t i = 0; i < value.size(); ++i) {
        if (i) out += ',';
        write(value[i], out);
      }
      out += ']';
      break;
    case nlohmann::json::value_t::string: out += model::python_json_string(value.get_ref<const std::string&>()); break;
    case nlohmann::json::value_t::number_float: out += model::python_float_repr(value.get<double>()); break;
    default: out += value.dump();  // null, booleans and integers: the same text in both
  }
}

}  // namespace

std::string canonical_json(const nlohmann::json& value) {
  std::string out;
  write(value, out);
  return out;
}

}  // namespace frank::lab
