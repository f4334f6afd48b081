#pragma once
// Everything a Tokenizer knows, as read from tokenizer.json.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "frank/model/tokenizer/added_tokens.h"
#include "frank/model/tokenizer/byte_pair_encoder.h"
#include "frank/model/tokenizer/pre_tokenizer.h"

namespace frank::model::tok {

struct TokenizerData {
  AddedTokenMatcher added_tokens;
  PreTokenizer pre_tokenizer;
  BytePairEncoder encoder;
  std::unordered_map<std::string, int32_t> ids_by_token;  // vocab (byte-level spelling), then added contents
  std::vector<std::string> bytes_by_id;                   // what each id decodes to
  std::vector<uint8_t> id_exists;                         // ids may have gaps
  std::vector<uint8_t> id_is_special;
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
};

// Throws frank::Error, prefixed with the path, for a file that is unreadable, malformed or uses
// a feature this tokenizer does not implement.
TokenizerData read_tokenizer_file(const std::filesystem::path& tokenizer_json);

}  // namespace frank::model::tok
