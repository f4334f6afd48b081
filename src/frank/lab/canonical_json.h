#pragma once
// The canonical text of a JSON value, the form a design is hashed in (strings and floats are
// written by model/python_json, frank's one implementation of Python's json text).
//
// It is byte for byte what Python writes with
//   json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
// so anyone can re-derive a design id with the standard library of Python:
//  - no whitespace between tokens;
//  - object keys sorted by Unicode code point (= UTF-8 byte order), recursively;
//  - strings as UTF-8, escaping only '"', '\\', the control characters below U+0020 (\b \f \n \r \t
//    by name, the others as \u00xx in lowercase hex);
//  - integers in decimal; floating-point numbers as Python's repr: the shortest digits that read
//    back to the same double, in positional form ("0.0001", "100.0", "1000000000000000.0") when
//    the decimal exponent is in [-4, 16), otherwise as "1e-05", "1.5e+16" (two exponent digits
//    at least). Integers and floats stay distinct: 1 and 1.0 are different texts.
#include <nlohmann/json.hpp>
#include <string>

namespace frank::lab {

std::string canonical_json(const nlohmann::json& value);

}  // namespace frank::lab
