#pragma once
// Added (and special) tokens found in raw text before any pre-tokenization, with HuggingFace
// tokenizers' semantics: leftmost-longest matching (its Aho-Corasick MatchKind::LeftmostLongest),
// first the tokens with normalized=false on the whole text, then those with normalized=true on the
// text between; single_word, lstrip and rstrip as in HF's AddedVocabulary::find_matches.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frank/model/tokenizer/regex.h"

namespace frank::model::tok {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;  // skipped by decode(skip_special = true)
  bool normalized = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
};

// A run of the input: an added token (token_id >= 0) or plain text for the BPE (token_id < 0).
struct Segment {
  std::string_view text;
  int32_t token_id;
};

class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  // Splits `text` into segments, in order. Plain-text segments are never empty.
  void split(std::string_view text, std::vector<Segment>& segments) const;

 private:
  // A byte trie over the contents of one group of tokens.
  class Trie {
   public:
    void insert(std::string_view content, int32_t token_index);
    // The longest token that `text` starts with at `pos`: (length, token index) or (0, -1).
    std::pair<std::size_t, int32_t> longest_at(std::string_view text, std::size_t pos) const;
    bool may_start_with(uint8_t byte) const { return first_byte_[byte]; }

   private:
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> children;
      int32_t token_index = -1;
    };
    std::vector<Node> nodes_{1};
    std::array<bool, 256> first_byte_{};
  };

  void split_with(const Trie& trie, std::string_view text, std::vector<Segment>& segments) const;

  std::vector<AddedToken> tokens_;
  Trie raw_;         // normalized = false: matched in the raw text
  Trie normalized_;  // normalized = true: matched in the (normalizer-free) text between those
  Regex word_char_;  // Rust regex's \w, for single_word
  Regex white_space_;  // Rust regex's \s, for lstrip / rstrip
};

}  // namespace frank::model::tok
