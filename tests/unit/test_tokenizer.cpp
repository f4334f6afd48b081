// The tokenizer's contract beyond the HF goldens: random valid UTF-8 round-trips, the streaming
// detokenizer never splits a character, bad input (invalid UTF-8, unknown ids, malformed
// tokenizer.json) is a clear frank::Error, and random bytes never crash it (fuzz, about 3 s).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "frank/core/error.h"
#include "frank/model/tokenizer/regex.h"
#include "frank/model/tokenizer/utf8.h"
#include "safetensors_test_util.h"
#include "tokenizer_test_util.h"

namespace frank::test {
namespace {

using model::StreamingDetokenizer;
using model::Tokenizer;
using ::testing::HasSubstr;
using nlohmann::json;

// Random valid UTF-8 over every plane: ASCII, whitespace of all kinds, and any scalar value.
std::string random_valid_utf8(std::mt19937_64& rng) {
  static const std::vector<char32_t> spaces = {' ', '\t', '\n', '\r', 0x0B, 0x0C, 0x85, 0xA0, 0x2028, 0x3000};
  std::string text;
  const std::size_t length = rng() % 120;
  for (std::size_t i = 0; i < length; ++i) {
    const unsigned kind = rng() % 10;
    char32_t cp;
    if (kind < 4) {
      cp = static_cast<char32_t>(0x20 + rng() % 0x5F);
    } else if (kind < 5) {
      cp = spaces[rng() % spaces.size()];
    } else if (kind < 7) {
      cp = static_cast<char32_t>(rng() % 0x10000);
    } else {
      cp = static_cast<char32_t>(rng() % 0x110000);
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // surrogates are not scalar values
    model::tok::append_code_point(text, cp);
  }
  return text;
}

std::string stream_all(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  StreamingDetokenizer stream(tokenizer);
  std::string text;
  for (const int32_t id : ids) {
    const std::string piece = stream.push(id);
    EXPECT_EQ(model::tok::find_invalid_utf8(piece), model::tok::kValidUtf8) << "push returned part of a character";
    text += piece;
  }
  return text + stream.flush();
}

TEST(Utf8, FindsTheFirstIllFormedByte) {
  using model::tok::find_invalid_utf8;
  EXPECT_EQ(find_invalid_utf8("plain ascii and é 中 😀"), model::tok::kValidUtf8);
  EXPECT_EQ(find_invalid_utf8("ab\xC0\xAF"), 2u);          // overlong '/'
  EXPECT_EQ(find_invalid_utf8("a\xED\xA0\x80"), 1u);       // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("abc\xF4\x90\x80\x80"), 3u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("12345678\xE4\xB8"), 8u);    // truncated at the end
  EXPECT_EQ(find_invalid_utf8("\x80"), 0u);                // stray continuation byte
  EXPECT_EQ(find_invalid_utf8(std::string("a\0b", 3)), model::tok::kValidUtf8);
}

TEST(Utf8, LossyDecodingReplacesMaximalSubparts) {
  // The example of Unicode's Table 3-8 (U+FFFD substitution of maximal subparts).
  std::string out;
  EXPECT_EQ(model::tok::append_utf8_lossy(out, "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", true), 13u);
  EXPECT_EQ(out, "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd");
  out.clear();
  EXPECT_EQ(model::tok::append_utf8_lossy(out, "ok\xE4\xB8", false), 2u);  // holds back the incomplete tail
  EXPECT_EQ(out, "ok");
}

TEST(TokenizerRegex, ReadsPatternsAsOnigurumaDoes) {
  using model::tok::Regex;
  EXPECT_TRUE(Regex(R"(\s+)", false).matches_whole(" \t\n\u0085\u00a0\u2028\u3000"));
  EXPECT_FALSE(Regex(R"(\s)", false).matches_whole("\u180e"));  // not White_Space, unlike PCRE2's own \s
  EXPECT_TRUE(Regex(R"([^\s])", false).matches_whole("\u180e"));
  EXPECT_TRUE(Regex(R"(\S)", false).matches_whole("\u180e"));
  EXPECT_TRUE(Regex(R"(\p{N}{1,3})", false).matches_whole("٣²7"));
  EXPECT_TRUE(Regex("a.b", /*literal=*/true).matches_whole("a.b"));
  EXPECT_FALSE(Regex("a.b", /*literal=*/true).matches_whole("axb"));
  for (const char* differs : {R"(\w+)", R"(x\b)", R"([\W])", R"(\h)", "[[:alpha:]]"}) {
    try {
      Regex(differs, false);
      ADD_FAILURE() << differs << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("not supported")) << differs;
    }
  }
}

TEST(Tokenizer, DeepSeekVocabularyAndSpecialTokens) {
  const Tokenizer& tokenizer = deepseek_tokenizer();
  EXPECT_EQ(tokenizer.vocab_size(), 129280);
  EXPECT_EQ(tokenizer.bos_id(), 0);
  EXPECT_EQ(tokenizer.eos_id(), 1);
  EXPECT_EQ(tokenizer.token_id("<｜begin▁of▁sentence｜>"), 0);
  EXPECT_EQ(tokenizer.token_id("<｜User｜>"), 128803);
  EXPECT_EQ(tokenizer.token_id("<｜Assistant｜>"), 128804);
  EXPECT_EQ(tokenizer.token_id("<think>"), 128821);
  EXPECT_EQ(tokenizer.token_id("｜DSML｜"), 128825);
  EXPECT_TRUE(tokenizer.token_id("Ġthe").has_value());
  EXPECT_EQ(tokenizer.token_id("<｜no▁such▁token｜>"), std::nullopt);
  EXPECT_EQ(tokenizer.token_id(""), std::nullopt);
  EXPECT_EQ(tokenizer.encode("", /*add_bos=*/true), std::vector<int32_t>{0});
  EXPECT_EQ(tokenizer.encode("<｜User｜>hi<｜Assistant｜>"), (std::vector<int32_t>{128803, 6366, 128804}));
  const std::vector<int32_t> chat = {0, 128803, 6366, 128804, 1};
  EXPECT_EQ(tokenizer.decode(chat, /*skip_special=*/true), "<｜User｜>hi<｜Assistant｜>");
}

TEST(Tokenizer, RandomValidUtf8RoundTrips) {
  const Tokenizer& tokenizer = deepseek_tokenizer();
  std::mt19937_64 rng(20240607);
  for (int i = 0; i < 2000; ++i) {
    const std::string text = random_valid_utf8(rng);
    const auto ids = tokenizer.encode(text);
    ASSERT_EQ(tokenizer.decode(ids), text) << "text " << i;
    ASSERT_EQ(stream_all(tokenizer, ids), text) << "text " << i;
  }
}

TEST(Tokenizer, ConcurrentEncodesShareTheCacheSafely) {
  std::vector<std::string> texts;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200; ++i) texts.push_back(random_valid_utf8(rng) + " repeated words repeated words");
  std::vector<std::vector<int32_t>> expected;
  for (const auto& text : texts) expected.push_back(deepseek_tokenizer().encode(text));
  // A fresh tokenizer, so the threads fill its empty cache while they read it.
  const Tokenizer tokenizer = Tokenizer::load(deepseek_tokenizer_path());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round)
        for (std::size_t i = 0; i < texts.size(); ++i) {
          const std::size_t k = (i * 7 + t * 31 + round) % texts.size();
          if (tokenizer.encode(texts[k]) != expected[k]) ++mismatches;
        }
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Tokenizer, StreamingHoldsBackPartialCharacters) {
  const Tokenizer& tokenizer = deepseek_tokenizer();
  const int32_t lead = *tokenizer.token_id("Ã");  // byte 0xC3
  const int32_t tail = *tokenizer.token_id("©");  // byte 0xA9; C3 A9 is "é"
  StreamingDetokenizer stream(tokenizer);
  EXPECT_EQ(stream.push(lead), "");
  EXPECT_EQ(stream.push(tail), "é");
  EXPECT_EQ(stream.push(lead), "");
  EXPECT_EQ(stream.push(*tokenizer.token_id("a")), "\uFFFDa");
  EXPECT_EQ(stream.push(lead), "");
  EXPECT_EQ(stream.flush(), "\uFFFD");
  EXPECT_EQ(stream.flush(), "");

  // Random ids, heavy in single bytes that break characters: the pieces always equal decode.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 500; ++i) {
    std::vector<int32_t> ids;
    for (std::size_t k = rng() % 20; k > 0; --k)
      ids.push_back(rng() % 2 ? static_cast<int32_t>(rng() % tokenizer.vocab_size())
                              : *tokenizer.token_id(i % 2 ? "Ã" : "©"));
    ASSERT_EQ(stream_all(tokenizer, ids), tokenizer.decode(ids));
  }
}

TEST(Tokenizer, InvalidUtf8IsAClearError) {
  for (const std::string bad : {"abc\xFF", "\xC3", "x\xED\xA0\x80y", "\xE0\x80\xAF", "\xF8\x88\x80\x80\x80"}) {
    try {
      deepseek_tokenizer().encode(bad);
      ADD_FAILURE() << "no error for invalid UTF-8";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("not valid UTF-8"));
    }
  }
}

TEST(Tokenizer, IdsOutsideTheVocabularyAreClearErrors) {
  const Tokenizer& tokenizer = deepseek_tokenizer();
  for (const int32_t bad : {-1, 129280, 1 << 30, INT32_MIN}) {
    const std::vector<int32_t> ids = {5, bad};
    try {
      tokenizer.decode(ids);
      ADD_FAILURE() << "no error for id " << bad;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("not in the vocabulary"));
    }
    StreamingDetokenizer stream(tokenizer);
    EXPECT_THROW(stream.push(bad), Error);
  }
}

// Malformed or unsupported tokenizer.json files, each a variation of the small tiny-flags file.
class MalformedTokenizerFile : public ::testing::Test {
 protected:
  json base() const {
    std::ifstream in(tokenizer_fixture_dir() / "tiny-flags" / "tokenizer.json");
    return json::parse(in);
  }
  void expect_error_for_text(const std::string& contents, const std::string& fragment) {
    write_file(dir_ / "tokenizer.json", contents);
    try {
      Tokenizer::load(dir_ / "tokenizer.json");
      ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(fragment));
      EXPECT_THAT(e.what(), HasSubstr("tokenizer.json"));
    }
  }
  void expect_error(const json& j, const std::string& fragment) { expect_error_for_text(j.dump(), fragment); }
  TempDir dir_;
};

TEST_F(MalformedTokenizerFile, MissingFile) {
  EXPECT_THROW(Tokenizer::load(dir_ / "nothing-here.json"), Error);
}

TEST_F(MalformedTokenizerFile, NotJsonOrTruncated) {
  const std::string text = base().dump();
  expect_error_for_text(text.substr(0, text.size() / 2), "not valid JSON");
  expect_error_for_text("", "not valid JSON");
  expect_error_for_text("tokenizer", "not valid JSON");
  expect_error_for_text("[1, 2, 3]", "no 'model' section");
}

TEST_F(MalformedTokenizerFile, MissingOrUnknownModel) {
  json j = base();
  j.erase("model");
  expect_error(j, "no 'model' section");
  j = base();
  j["model"]["type"] = "WordPiece";
  expect_error(j, "model type 'WordPiece' is not supported");
  j = base();
  j["model"]["dropout"] = 0.1;
  expect_error(j, "dropout");
  j = base();
  j["model"]["vocab"] = "not a map";
  expect_error(j, "model.vocab must be an object");
  j = base();
  j["added_tokens"][0].erase("content");
  expect_error(j, "unexpected structure");
}

TEST_F(MalformedTokenizerFile, BadRegexOrPreTokenizer) {
  json j = base();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "[unclosed";
  expect_error(j, "does not compile");
  j = base();
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  expect_error(j, "unknown Split behavior 'Sideways'");
  j = base();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_error(j, "'Whitespace' is not supported");
  j = base();
  j["pre_tokenizer"]["pretokenizers"].erase(1);  // no ByteLevel
  expect_error(j, "ByteLevel");
  j = base();
  j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true;
  expect_error(j, "use_regex");
  j = base();
  j["normalizer"] = {{"type", "NFC"}};
  expect_error(j, "normalizer");
  j = base();
  j["decoder"] = {{"type", "WordPiece"}};
  expect_error(j, "decoder");
}

TEST_F(MalformedTokenizerFile, BadVocabMergesOrIds) {
  json j = base();
  j["model"]["merges"].push_back("q zz");
  expect_error(j, "token 'zz' is not in the vocab");
  j = base();
  j["model"]["merges"].push_back("a b c");
  expect_error(j, "not a pair of tokens");
  j = base();
  j["model"]["vocab"].erase("Ā");  // byte 0x00
  expect_error(j, "no token for byte 0x00");
  j = base();
  j["model"]["vocab"]["zz"] = 5;
  expect_error(j, "vocab id 5 is given to more than one token");
  j = base();
  j["model"]["vocab"]["zz"] = -5;
  expect_error(j, "expected an integer");
  j = base();
  j["added_tokens"][0]["id"] = 1ll << 31;
  expect_error(j, "expected an integer");
  j = base();
  j["added_tokens"][0]["id"] = "7";
  expect_error(j, "expected an integer");
}

TEST_F(MalformedTokenizerFile, ConfigNamingAnUnknownBos) {
  write_file(dir_ / "tokenizer_config.json", R"({"bos_token": "<nope>"})");
  expect_error(base(), "'<nope>', which is not a token");
}

TEST_F(MalformedTokenizerFile, NoBosIsAnErrorOnlyWhenAsked) {
  write_file(dir_ / "tokenizer.json", base().dump());
  const auto tokenizer = Tokenizer::load(dir_ / "tokenizer.json");
  EXPECT_EQ(tokenizer.encode("hello").size(), 1u);
  EXPECT_THROW(tokenizer.bos_id(), Error);
  EXPECT_THROW(tokenizer.encode("hello", /*add_bos=*/true), Error);
}

// Random bytes: encode either succeeds (and then round-trips) or throws frank::Error for invalid
// UTF-8, never anything else. Bounded in time so CI stays fast.
TEST(TokenizerFuzz, RandomBytesEncodeOrThrowError) {
  const Tokenizer& tokenizer = deepseek_tokenizer();
  const std::vector<std::string> fragments = {"<｜User｜>", "<｜", "｜>", "<think>", "</", "\xEF\xBD", "\xE4\xB8\xAD",
                                              " ", "\n", "123", "abc", "😀", "\xF0\x9F", "\xC3"};
  std::mt19937_64 rng(99);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::size_t runs = 0, valid = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string input;
    for (std::size_t k = rng() % 24; k > 0; --k) {
      if (rng() % 3 == 0)
        input += fragments[rng() % fragments.size()];
      else
        input += static_cast<char>(rng() % 4 == 0 ? rng() % 256 : 0x20 + rng() % 0x60);
    }
    const bool is_valid = model::tok::find_invalid_utf8(input) == model::tok::kValidUtf8;
    try {
      const auto ids = tokenizer.encode(input);
      ASSERT_TRUE(is_valid) << "accepted invalid UTF-8";
      ASSERT_EQ(tokenizer.decode(ids), input);
      ++valid;
    } catch (const Error&) {
      ASSERT_FALSE(is_valid) << "rejected valid UTF-8";
    }
    ++runs;
  }
  EXPECT_GT(runs, 1000u);
  EXPECT_GT(valid, 100u);
  RecordProperty("runs", static_cast<int>(runs));
}

}  // namespace
}  // namespace frank::test
