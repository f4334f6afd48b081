#pragma once
// The pre-tokenizer of a byte-level BPE tokenizer.json: its Split steps (a regex or literal
// pattern, one of HF's five delimiter behaviours, optionally inverted), each applied to every piece
// the previous step produced, then ByteLevel. ByteLevel only re-spells bytes as characters, a
// bijection, and the BPE here works on the raw bytes, so ByteLevel needs no work of its own.
#include <functional>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "frank/model/tokenizer/regex.h"

namespace frank::model::tok {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct SplitStep {
  Regex pattern;
  SplitBehavior behavior;
  bool invert;

  // Working memory reused between calls, so splitting allocates only while it grows.
  struct Scratch {
    std::vector<std::pair<Span, bool>> flagged;  // (span, is_delimiter), covering the text
    std::vector<Span> pieces;
  };
  // Fills scratch.pieces with the non-empty pieces of `text` that this step keeps, exactly as
  // HF's NormalizedString::split does.
  void split(std::string_view text, Scratch& scratch) const;
};

class PreTokenizer {
 public:
  // From tokenizer.json's "pre_tokenizer": Split steps (alone or in a Sequence) ending in one
  // ByteLevel step. Throws frank::Error for anything else.
  static PreTokenizer from_json(const nlohmann::json& spec);

  // Calls `on_piece` with each pre-token of `text`, in order.
  void for_each_piece(std::string_view text, const std::function<void(std::string_view)>& on_piece) const;

 private:
  void apply(std::size_t step, std::string_view text, std::vector<SplitStep::Scratch>& scratch,
             const std::function<void(std::string_view)>& on_piece) const;

  std::vector<SplitStep> steps_;
};

}  // namespace frank::model::tok
