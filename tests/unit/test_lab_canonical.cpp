// The canonical design text: byte for byte Python's json.dumps(sort_keys=True,
// separators=(",", ":"), ensure_ascii=False), checked against the fixture and by hand.
#include <gtest/gtest.h>

#include "frank/core/sha256.h"
#include "frank/lab/canonical_json.h"
#include "lab_test_util.h"

namespace frank::lab {
namespace {

using nlohmann::json;

TEST(LabCanonicalJson, MatchesPythonJsonDumps) {
  for (const auto& c : test::lab_fixture("canonical.json")) {
    const std::string text = canonical_json(c.at("value"));
    EXPECT_EQ(text, c.at("canonical").get<std::string>());
    EXPECT_EQ(sha256_hex(text), c.at("sha256").get<std::string>());
  }
}

TEST(LabCanonicalJson, SortsKeysDropsWhitespaceKeepsIntegersAndFloatsApart) {
  const json j = json::parse(R"({ "b": [1, 1.0, 2.50], "a": {"d": null, "c": true} })");
  EXPECT_EQ(canonical_json(j), R"({"a":{"c":true,"d":null},"b":[1,1.0,2.5]})");
}

TEST(LabCanonicalJson, FloatsAsPythonRepr) {
  EXPECT_EQ(canonical_json(json(0.0001)), "0.0001");
  EXPECT_EQ(canonical_json(json(0.00001)), "1e-05");
  EXPECT_EQ(canonical_json(json(1e15)), "1000000000000000.0");
  EXPECT_EQ(canonical_json(json(1e16)), "1e+16");
  EXPECT_EQ(canonical_json(json(0.1 + 0.2)), "0.30000000000000004");
  EXPECT_EQ(canonical_json(json(-0.0)), "-0.0");
}

TEST(LabCanonicalJson, EscapesOnlyWhatPythonEscapes) {
  EXPECT_EQ(canonical_json(json("caf\xc3\xa9/\"\n\x01")), "\"caf\xc3\xa9/\\\"\\n\\u0001\"");
}

}  // namespace
}  // namespace frank::lab
