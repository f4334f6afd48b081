#include "frank/model/python_json.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "frank/core/error.h"

namespace frank::model {

std::string python_json_string_body(std::string_view utf8) {
  // json's encode_basestring: only '"', '\\' and the C0 controls are escaped.
  std::string out;
  out.reserve(utf8.size());
  for (const char c : utf8) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        else
          out += c;
    }
  }
  return out;
}

std::string python_json_string(std::string_view utf8) { return "\"" + python_json_string_body(utf8) + "\""; }

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
  // Shortest round-trip digits, as Python's repr uses; then Python's layout of them.
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));
  std::string out;
  if (sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (const char c : sci.substr(0, e))
    if (c != '.') digits += c;
  const int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const int point = exponent + 1;  // value = 0.<digits> * 10^point
  const int n = static_cast<int>(digits.size());
  if (point <= -4 || point > 16) {  // Python's switch to exponent notation for repr
    out += digits.front();
    if (n > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (point <= 0) {
    out += "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (point >= n) {
    out += digits + std::string(static_cast<size_t>(point - n), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
  }
  return out;
}

namespace {

// nlohmann's own DOM builder, except that an integer literal it could only store as a double is
// an error (the lexer hands over the literal text with every float).
class ExactNumberDomParser : public nlohmann::detail::json_sax_dom_parser<nlohmann::ordered_json> {
 public:
  using json_sax_dom_parser::json_sax_dom_parser;
  bool number_float(double value, const std::string& literal) {
    if (literal.find_first_of(".eE") == std::string::npos)
      throw Error(fmt::format("integer {} does not fit 64 bits", literal));
    return json_sax_dom_parser::number_float(value, literal);
  }
};

}  // namespace

nlohmann::ordered_json parse_json_exact(std::string_view text) {
  nlohmann::ordered_json value;
  ExactNumberDomParser builder(value);
  nlohmann::ordered_json::sax_parse(text, &builder);
  return value;
}

std::string python_json_dumps(const nlohmann::ordered_json& value) {
  using Type = nlohmann::ordered_json::value_t;
  switch (value.type()) {
    case Type::null: return "null";
    case Type::boolean: return value.get<bool>() ? "true" : "false";
    case Type::number_integer: return std::to_string(value.get<int64_t>());
    case Type::number_unsigned: return std::to_string(value.get<uint64_t>());
    case Type::number_float: return python_float_repr(value.get<double>());
    case Type::string: return python_json_string(value.get_ref<const std::string&>());
    case Type::array: {
      std::string out = "[";
      for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + python_json_dumps(value[i]);
      return out + "]";
    }
    case Type::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        out += (first ? "" : ", ") + python_json_string(key) + ": " + python_json_dumps(item);
        first = false;
      }
      return out + "}";
    }
    default: break;  // binary and discarded values never come out of a JSON parse
  }
  throw std::logic_error("python_json_dumps: value is not JSON");
}

}  // namespace frank::model
