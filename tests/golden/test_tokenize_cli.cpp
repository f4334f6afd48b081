// `frank tokenize` / `frank detokenize`: HF's ids for a corpus text, the text back, and clear
// errors (exit 1) for bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>


#include "unit/safetensors_test_util.h"
#include "run_frank.h"
#include "unit/tokenizer_test_util.h"

namespace frank::test {
namespace {

using ::testing::HasSubstr;


std::string tokenizer_arg() { return "--tokenizer " + deepseek_tokenizer_path().string(); }

nlohmann::json corpus_row(const std::string& name) {
  for (const auto& row : read_jsonl(tokenizer_fixture_dir() / "corpus.jsonl"))
    if (row.at("name") == name) return row;
  throw std::runtime_error("no corpus text " + name);
}

TEST(TokenizeCli, TokenizeAndDetokenizeAgreeWithHf) {
  const auto row = corpus_row("chat_template");
  const std::string text = row.at("text");
  const auto ids = run_frank("tokenize " + tokenizer_arg(), text);
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  EXPECT_EQ(nlohmann::json::parse(ids.out), row.at("ids"));
  const auto with_bos = run_frank("tokenize --add-bos " + tokenizer_arg(), text);
  EXPECT_EQ(nlohmann::json::parse(with_bos.out), row.at("ids_bos"));
  const auto back = run_frank("detokenize " + tokenizer_arg(), ids.out);
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(back.out, text);
}

TEST(TokenizeCli, BadInputIsAClearError) {
  const auto invalid = run_frank("tokenize " + tokenizer_arg(), "ok \xFF");
  EXPECT_EQ(invalid.exit_code, 1);
  EXPECT_THAT(invalid.err, HasSubstr("not valid UTF-8"));
  const auto not_json = run_frank("detokenize " + tokenizer_arg(), "[1, 2");
  EXPECT_EQ(not_json.exit_code, 1);
  EXPECT_THAT(not_json.err, HasSubstr("not JSON"));
  const auto not_ids = run_frank("detokenize " + tokenizer_arg(), R"([1, "two"])");
  EXPECT_EQ(not_ids.exit_code, 1);
  EXPECT_THAT(not_ids.err, HasSubstr("\"two\" is not a token id"));
  const auto out_of_vocab = run_frank("detokenize " + tokenizer_arg(), "[1, 999999]");
  EXPECT_EQ(out_of_vocab.exit_code, 1);
  EXPECT_THAT(out_of_vocab.err, HasSubstr("not in the vocabulary"));
  const auto no_file = run_frank("tokenize --tokenizer /nonexistent/tokenizer.json", "x");
  EXPECT_EQ(no_file.exit_code, 1);
  EXPECT_THAT(no_file.err, HasSubstr("cannot open"));
}

}  // namespace
}  // namespace frank::test
