#pragma once
// PCRE2 (JIT, UTF, UCP) behind a small interface: the Split patterns of a tokenizer.json are
// Oniguruma regexes in HuggingFace tokenizers. PCRE2 reads the syntax these files use (\p{..}
// classes, look-ahead, bounded repeats) the same way once \s is spelled as Unicode White_Space,
// refuses the few constructs whose meaning differs, and is fast with its JIT.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace frank::model::tok {

struct Span {
  std::size_t begin;
  std::size_t end;
};

class Regex {
 public:
  // `literal`: match `pattern` as plain text (a Split's {"String": ...} pattern).
  // Throws frank::Error naming the pattern and PCRE2's message if it does not compile.
  Regex(std::string_view pattern, bool literal);

  // The matches in `subject` (valid UTF-8), in order, as Oniguruma's find_iter yields them for
  // HF's Split: an empty match right where the previous match ended is skipped.
  class Matches {
   public:
    Matches(const Regex& regex, std::string_view subject) : regex_(regex), subject_(subject) {}
    bool next(Span& match);  // false when there are no more

   private:
    const Regex& regex_;
    std::string_view subject_;
    std::size_t search_from_ = 0;
    bool previous_ended_here_ = false;  // whether the last match ended at search_from_
  };

  // Whether the whole of `subject` matches.
  bool matches_whole(std::string_view subject) const;

 private:
  // The first match in subject at or after `from`, if any.
  bool find(std::string_view subject, std::size_t from, Span& match) const;

  struct Code;
  std::shared_ptr<const Code> code_;  // immutable compiled code, shared by copies
  std::string pattern_;               // as written in the file, for error messages
};

// The Unicode version of PCRE2's property tables (e.g. "14.0.0" for Debian 12's PCRE2 10.42).
std::string regex_unicode_version();

}  // namespace frank::model::tok
