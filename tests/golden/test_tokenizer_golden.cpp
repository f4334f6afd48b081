// The tokenizer against HuggingFace tokenizers 0.23.3 (fixtures from
// tools/reference/make_tokenizer_fixtures.py): ids on the whole corpus, decoding, every Split
// behaviour, and the added-token flags.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "frank/core/error.h"
#include "frank/model/tokenizer/pre_tokenizer.h"
#include "frank/model/tokenizer/regex.h"
#include "frank/model/tokenizer/utf8.h"
#include "unit/tokenizer_test_util.h"

namespace frank::test {
namespace {

using nlohmann::json;

json meta() {
  std::ifstream in(tokenizer_fixture_dir() / "meta.json");
  return json::parse(in);
}

// "14.0.0" -> {14, 0, 0}: versions compare part by part ("16.10" is newer than "16.9").
std::vector<int> version_parts(const std::string& version) {
  std::vector<int> parts;
  std::stringstream in(version);
  for (std::string part; std::getline(in, part, '.');) parts.push_back(std::stoi(part));
  while (!parts.empty() && parts.back() == 0) parts.pop_back();  // "16.0" == "16.0.0"
  return parts;
}

// Whether PCRE2 knows at least the Unicode version HF's regex engine (Oniguruma) knows.
bool regex_unicode_at_least_hf() {
  const std::string hf = meta().at("hf_regex_unicode_version");
  return version_parts(model::tok::regex_unicode_version()) >= version_parts(hf);
}

TEST(TokenizerGolden, UnicodeVersionsCompareByParts) {
  EXPECT_GT(version_parts("16.10"), version_parts("16.9"));
  EXPECT_EQ(version_parts("16.0"), version_parts("16.0.0"));
  EXPECT_LT(version_parts("14.0.0"), version_parts("16.0"));
}

std::string describe_difference(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  std::size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return fmt::format("first difference at id {} of {} (frank {}, HF {})", i, want.size(),
                     i < got.size() ? std::to_string(got[i]) : "end", i < want.size() ? std::to_string(want[i]) : "end");
}

TEST(TokenizerGolden, CorpusIdsEqualHf) {
  const auto& tokenizer = deepseek_tokenizer();
  std::size_t compared = 0;
  for (const json& row : read_jsonl(tokenizer_fixture_dir() / "corpus.jsonl")) {
    if (row.value("post_unicode14", false)) continue;  // CorpusPostUnicode14IdsEqualHf
    const std::string text = row.at("text");
    const auto ids = tokenizer.encode(text);
    const auto want = row.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(ids, want) << row.at("name") << ": " << describe_difference(ids, want);
    EXPECT_EQ(tokenizer.encode(text, /*add_bos=*/true), row.at("ids_bos").get<std::vector<int32_t>>()) << row.at("name");
    ++compared;
  }
  EXPECT_GE(compared, 300u);
}

// Characters assigned after Unicode 14.0 (🩷, 🫨, CJK extension H, ...) are unassigned for a PCRE2
// whose tables are older than HF's Oniguruma (Debian 12's PCRE2 10.42 has 14.0, HF 16.0), so
// \p{L}/\p{S} differ there and so do the pre-tokens. Compared only with a new enough PCRE2.
TEST(TokenizerGolden, CorpusPostUnicode14IdsEqualHf) {
  const auto rows = read_jsonl(tokenizer_fixture_dir() / "corpus.jsonl");
  const auto count = std::count_if(rows.begin(), rows.end(), [](const json& r) { return r.value("post_unicode14", false); });
  if (!regex_unicode_at_least_hf())
    GTEST_SKIP() << count << " texts need PCRE2 with Unicode " << meta().at("hf_regex_unicode_version").get<std::string>()
                 << "; this PCRE2 has " << model::tok::regex_unicode_version();
  for (const json& row : rows) {
    if (!row.value("post_unicode14", false)) continue;
    const auto ids = deepseek_tokenizer().encode(row.at("text").get<std::string>());
    EXPECT_EQ(ids, row.at("ids").get<std::vector<int32_t>>()) << row.at("name");
  }
}

TEST(TokenizerGolden, CorpusRoundTripsAndStreams) {
  const auto& tokenizer = deepseek_tokenizer();
  for (const json& row : read_jsonl(tokenizer_fixture_dir() / "corpus.jsonl")) {
    const std::string text = row.at("text");
    const auto ids = tokenizer.encode(text);
    EXPECT_EQ(tokenizer.decode(ids), text) << row.at("name");
    model::StreamingDetokenizer stream(tokenizer);
    std::string streamed;
    for (const int32_t id : ids) {
      const std::string piece = stream.push(id);
      ASSERT_EQ(model::tok::find_invalid_utf8(piece), model::tok::kValidUtf8) << row.at("name") << ": split character";
      streamed += piece;
    }
    EXPECT_EQ(stream.flush(), "") << row.at("name");
    EXPECT_EQ(streamed, text) << row.at("name");
  }
}

TEST(TokenizerGolden, DecodeEqualsHf) {
  const auto& tokenizer = deepseek_tokenizer();
  for (const json& row : read_jsonl(tokenizer_fixture_dir() / "decode_cases.jsonl")) {
    const auto ids = row.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer.decode(ids), row.at("text").get<std::string>()) << row.at("ids").dump();
    EXPECT_EQ(tokenizer.decode(ids, /*skip_special=*/true), row.at("text_skip_special").get<std::string>())
        << row.at("ids").dump();
    model::StreamingDetokenizer stream(tokenizer);
    std::string streamed;
    for (const int32_t id : ids) streamed += stream.push(id);
    EXPECT_EQ(streamed + stream.flush(), row.at("text").get<std::string>()) << row.at("ids").dump();
  }
}

TEST(TokenizerGolden, SplitBehaviorsEqualHf) {
  std::map<std::string, model::tok::PreTokenizer> by_spec;
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  std::size_t cases = 0;
  for (const json& row : read_jsonl(tokenizer_fixture_dir() / "split_cases.jsonl")) {
    const std::string key = row.at("split").dump();
    auto it = by_spec.find(key);
    if (it == by_spec.end()) {
      const json spec = {{"type", "Sequence"}, {"pretokenizers", {row.at("split"), byte_level}}};
      it = by_spec.emplace(key, model::tok::PreTokenizer::from_json(spec)).first;
    }
    std::vector<std::string> pieces;
    it->second.for_each_piece(row.at("text").get<std::string>(), [&](std::string_view p) { pieces.emplace_back(p); });
    EXPECT_EQ(pieces, row.at("pieces").get<std::vector<std::string>>()) << key << " on " << row.at("text").dump();
    ++cases;
  }
  EXPECT_GE(cases, 500u);
}

TEST(TokenizerGolden, AddedTokenFlagsEqualHf) {
  const auto tokenizer = model::Tokenizer::load(tokenizer_fixture_dir() / "tiny-flags" / "tokenizer.json");
  for (const json& row : read_jsonl(tokenizer_fixture_dir() / "tiny-flags" / "cases.jsonl"))
    EXPECT_EQ(tokenizer.encode(row.at("text").get<std::string>()), row.at("ids").get<std::vector<int32_t>>())
        << row.at("text").dump();
}

}  // namespace
}  // namespace frank::test
