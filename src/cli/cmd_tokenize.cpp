// `frank tokenize` and `frank detokenize`: UTF-8 text <-> token ids with a tokenizer.json, over
// stdin and stdout, for scripts and for checking the tokenizer by hand.
//
//   frank tokenize --tokenizer FILE [--add-bos] < text      prints the ids as one JSON array
//   frank detokenize --tokenizer FILE [--skip-special] < ids  prints the text (a JSON array of ids)
#include <fmt/format.h>

#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "frank/core/error.h"
#include "frank/model/tokenizer.h"

namespace frank::cli {
namespace {

struct TokenizeOptions {
  std::string tokenizer;
  bool add_bos = false;
  bool skip_special = false;
};

std::string read_stdin() { return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()}; }

void tokenize(const TokenizeOptions& o) {
  const auto tokenizer = model::Tokenizer::load(o.tokenizer);
  const auto ids = tokenizer.encode(read_stdin(), o.add_bos);
  std::cout << fmt::format("[{}]\n", fmt::join(ids, ","));
}

std::vector<int32_t> parse_id_array(const std::string& text) {
  nlohmann::json ids;
  try {
    ids = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(fmt::format("detokenize: stdin is not JSON ({})", e.what()));
  }
  if (!ids.is_array()) throw Error("detokenize: stdin must be a JSON array of token ids");
  std::vector<int32_t> result;
  for (const auto& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN || id.get<int64_t>() > INT32_MAX)
      throw Error(fmt::format("detokenize: {} is not a token id", id.dump()));
    result.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return result;
}

void detokenize(const TokenizeOptions& o) {
  const auto tokenizer = model::Tokenizer::load(o.tokenizer);
  std::cout << tokenizer.decode(parse_id_array(read_stdin()), o.skip_special) << std::flush;
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  auto* encode = app.add_subcommand("tokenize", "UTF-8 text on stdin -> token ids as a JSON array on stdout");
  encode->add_option("--tokenizer", opts->tokenizer, "tokenizer.json")->required();
  encode->add_flag("--add-bos", opts->add_bos, "start with the BOS token");
  encode->callback([opts] { tokenize(*opts); });

  auto* decode = app.add_subcommand("detokenize", "a JSON array of token ids on stdin -> text on stdout");
  decode->add_option("--tokenizer", opts->tokenizer, "tokenizer.json")->required();
  decode->add_flag("--skip-special", opts->skip_special, "leave out special tokens");
  decode->callback([opts] { detokenize(*opts); });
}

}  // namespace frank::cli
