#pragma once
// Text <-> token ids for DeepSeek-V4: a HuggingFace tokenizer.json with a byte-level BPE model,
// encoded exactly as HF tokenizers encodes it (added/special tokens found in the raw text first,
// then the file's Split regexes, then BPE merges by rank) and decoded back to the same bytes.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace frank::model {

namespace tok {
struct TokenizerData;
}

class Tokenizer {
 public:
  // Reads tokenizer.json (and, beside it, tokenizer_config.json for the BOS/EOS names if it
  // exists). Throws frank::Error naming the file and what is wrong or unsupported.
  static Tokenizer load(const std::filesystem::path& tokenizer_json);

  // Special/added tokens (e.g. "<｜begin▁of▁sentence｜>", "<｜User｜>") are matched in raw text as HF
  // does. Throws frank::Error if the text is not valid UTF-8. Safe to call from several threads.
  std::vector<int32_t> encode(std::string_view utf8_text, bool add_bos = false) const;

  // The text of `ids`; bytes that do not form UTF-8 become U+FFFD, as in HF. skip_special leaves
  // out the tokens marked special. Throws frank::Error for ids outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The raw bytes one id decodes to (possibly part of a UTF-8 character). Throws like decode.
  const std::string& token_bytes(int32_t id) const;

  // Id of a vocab entry (in its byte-level spelling, e.g. "Ġthe") or added token content.
  std::optional<int32_t> token_id(std::string_view token) const;

  int32_t vocab_size() const;  // including added tokens (max id + 1)
  int32_t bos_id() const;      // throw frank::Error if the tokenizer names no BOS / EOS token
  int32_t eos_id() const;

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

 private:
  explicit Tokenizer(std::unique_ptr<const tok::TokenizerData> data);
  std::unique_ptr<const tok::TokenizerData> data_;
};

// Turns ids into text one at a time and returns only complete UTF-8 characters, never half of
// one; the pieces it returns (and flush) concatenate to exactly decode(all ids).
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer);
  std::string push(int32_t id);  // throws frank::Error for ids outside the vocabulary
  std::string flush();           // whatever is pending (an incomplete character as U+FFFD)

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;  // bytes of a character that is not complete yet
};

}  // namespace frank::model
