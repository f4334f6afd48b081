// SHA-256 (frank/core/sha256.h, used for design ids and the arm order) against the FIPS 180-4
// example vectors and against Python's hashlib around the padding boundaries.
#include <gtest/gtest.h>

#include <string>

#include "frank/core/sha256.h"
#include "lab_test_util.h"

namespace frank::lab {
namespace {

TEST(Sha256, Fips180Examples) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                 "mnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, MatchesHashlibAcrossPaddingBoundaries) {
  for (const auto& c : test::lab_fixture("sha256.json"))
    EXPECT_EQ(sha256_hex(c.at("message").get<std::string>()), c.at("sha256").get<std::string>())
        << c.at("message").get<std::string>().size() << " bytes";
}

TEST(Sha256, DigestBytesAreTheHexDigits) {
  const Sha256Digest d = sha256("abc");
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[31], 0xad);
  EXPECT_EQ(to_hex(d), sha256_hex("abc"));
}

}  // namespace
}  // namespace frank::lab
