// JSON written as Python's json.dumps(ensure_ascii=False) writes it; the expected strings were
// printed by Python 3.11.
#include <gtest/gtest.h>

#include <limits>

#include "frank/core/error.h"
#include "frank/model/python_json.h"

namespace frank::model {
namespace {

using Json = nlohmann::ordered_json;

TEST(PythonJson, FloatsAsPythonRepr) {
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {-1.5, "-1.5"},
      {0.1, "0.1"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {1.2345678901234568e+17, "1.2345678901234568e+17"},
      {0.0001, "0.0001"},
      {1e-05, "1e-05"},
      {0.00012345, "0.00012345"},
      {1.5e-05, "1.5e-05"},
      {2.5e+300, "2.5e+300"},
      {5e-324, "5e-324"},
      {1.7976931348623157e+308, "1.7976931348623157e+308"},
      {1.0 / 3.0, "0.3333333333333333"},
      {100.0, "100.0"},
      {1e+22, "1e+22"},
      {12345.678, "12345.678"},
      {9007199254740992.0, "9007199254740992.0"},
      {0.3, "0.3"},
      {1.5e-323, "1.5e-323"},
      {std::numeric_limits<double>::infinity(), "Infinity"},
      {-std::numeric_limits<double>::infinity(), "-Infinity"},
      {std::numeric_limits<double>::quiet_NaN(), "NaN"},
  };
  for (const auto& [value, want] : cases) EXPECT_EQ(python_float_repr(value), want) << want;
}

TEST(PythonJson, StringsEscapeOnlyQuotesBackslashesAndControls) {
  EXPECT_EQ(python_json_string("a\"b\\c\n\r\t\b\f\x01\x1f\x7f é 🚀 \u2028"),
            "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\x7f é 🚀 \u2028\"");
  EXPECT_EQ(python_json_string_body("x\"y"), "x\\\"y");
  EXPECT_EQ(python_json_string(std::string("\0", 1)), "\"\\u0000\"");
}

TEST(PythonJson, ValuesKeepOrderAndPythonSeparators) {
  const Json value = Json::parse(R"({"b":[1,{"x":null,"y":true}],"a":"s","e":{},"l":[],"n":-7,"u":18446744073709551615})");
  EXPECT_EQ(python_json_dumps(value),
            R"({"b": [1, {"x": null, "y": true}], "a": "s", "e": {}, "l": [], "n": -7, "u": 18446744073709551615})");
}

TEST(PythonJson, ExactParseKeepsPythonsViewOfRepeatedKeys) {
  // json.loads('{"b":1,"a":2,"b":3}') == {"b": 3, "a": 2}
  EXPECT_EQ(python_json_dumps(parse_json_exact(R"({"b":1,"a":2,"b":3,"z":-0,"f":-0.0})")),
            R"({"b": 3, "a": 2, "z": 0, "f": -0.0})");
}

TEST(PythonJson, ExactParseRejectsIntegersBeyond64Bits) {
  EXPECT_THROW(parse_json_exact(R"({"id": 123456789012345678901234})"), Error);
  EXPECT_EQ(python_json_dumps(parse_json_exact("[12345678901234567890, -9223372036854775808, 1.0e2]")),
            "[12345678901234567890, -9223372036854775808, 100.0]");
  EXPECT_THROW(parse_json_exact("{\"a\": }"), nlohmann::json::parse_error);
}

}  // namespace
}  // namespace frank::model
