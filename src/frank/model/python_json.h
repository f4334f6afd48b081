#pragma once
// JSON written byte for byte as Python's json.dumps(value, ensure_ascii=False) writes it.
// DeepSeek's chat encoder renders tool schemas and non-string tool-call arguments with json.dumps,
// and its parser rebuilds tool-call arguments with it, so frank's prompts and parsed arguments
// match only if frank writes JSON the same way: ", " and ": " separators, keys in their given
// order, floats as Python's repr (1e-05, 1e+16, 1.0), non-ASCII characters unescaped.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace frank::model {

std::string python_json_dumps(const nlohmann::ordered_json& value);

// A JSON string literal (with quotes) for UTF-8 text.
std::string python_json_string(std::string_view utf8);

// The same without the surrounding quotes, for text streamed into a string piece by piece.
std::string python_json_string_body(std::string_view utf8);

// repr(float) as json.dumps writes it; NaN and infinities as "NaN", "Infinity", "-Infinity".
std::string python_float_repr(double value);

// Parses JSON text to the value Python's json.loads gives, as far as python_json_dumps can tell:
// keys keep their order (a repeated key keeps its first place and its last value, as in Python).
// Integers that do not fit 64 bits are rejected with frank::Error: nlohmann would turn them into
// doubles where Python keeps every digit. Syntax errors throw nlohmann::json::parse_error.
nlohmann::ordered_json parse_json_exact(std::string_view text);

}  // namespace frank::model
