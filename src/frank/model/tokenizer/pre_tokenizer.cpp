#include "frank/model/tokenizer/pre_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "frank/core/error.h"

namespace frank::model::tok {
namespace {

using nlohmann::json;

SplitBehavior behavior_from_name(const std::string& name) {
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  throw Error(fmt::format("pre_tokenizer: unknown Split behavior '{}'", name));
}

SplitStep parse_split(const json& spec) {
  const json& pattern = spec.at("pattern");
  const bool literal = pattern.contains("String");
  if (!literal && !pattern.contains("Regex"))
    throw Error(fmt::format("pre_tokenizer: Split pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}, got {}",
                            pattern.dump()));
  return SplitStep{Regex(pattern.at(literal ? "String" : "Regex").get<std::string>(), literal),
                   behavior_from_name(spec.at("behavior").get<std::string>()), spec.value("invert", false)};
}

// ByteLevel as this tokenizer implements it: bytes to characters and nothing else.
void check_byte_level(const json& spec) {
  if (spec.value("add_prefix_space", false))
    throw Error("pre_tokenizer: ByteLevel with add_prefix_space=true is not supported");
  if (spec.value("use_regex", true))
    throw Error("pre_tokenizer: ByteLevel with use_regex=true is not supported (give the split as a Split step)");
}

// Keeps the spans of `flagged` a behaviour keeps, merging neighbours the way HF's split does.
void apply_behavior(SplitBehavior behavior, const std::vector<std::pair<Span, bool>>& flagged,
                    std::vector<Span>& pieces) {
  pieces.clear();
  bool previous_is_delimiter = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const auto& [span, is_delimiter] : flagged) pieces.push_back(span);
      break;
    case SplitBehavior::Removed:
      for (const auto& [span, is_delimiter] : flagged)
        if (!is_delimiter) pieces.push_back(span);
      break;
    case SplitBehavior::Contiguous:
      for (const auto& [span, is_delimiter] : flagged) {
        if (!pieces.empty() && is_delimiter == previous_is_delimiter)
          pieces.back().end = span.end;
        else
          pieces.push_back(span);
        previous_is_delimiter = is_delimiter;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const auto& [span, is_delimiter] : flagged) {
        if (!pieces.empty() && is_delimiter && !previous_is_delimiter)
          pieces.back().end = span.end;
        else
          pieces.push_back(span);
        previous_is_delimiter = is_delimiter;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (auto it = flagged.rbegin(); it != flagged.rend(); ++it) {
        const auto& [span, is_delimiter] = *it;
        if (!pieces.empty() && is_delimiter && !previous_is_delimiter)
          pieces.back().begin = span.begin;
        else
          pieces.push_back(span);
        previous_is_delimiter = is_delimiter;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
  }
  std::erase_if(pieces, [](const Span& s) { return s.begin == s.end; });
}

}  // namespace

void SplitStep::split(std::string_view text, Scratch& scratch) const {
  scratch.pieces.clear();
  if (text.empty()) return;
  // HF's Pattern::find_matches: the matches and the gaps between them, covering the text.
  scratch.flagged.clear();
  std::size_t previous_end = 0;
  Regex::Matches matches(pattern, text);
  for (Span m; matches.next(m);) {
    if (previous_end != m.begin) scratch.flagged.push_back({{previous_end, m.begin}, invert});
    scratch.flagged.push_back({m, !invert});
    previous_end = m.end;
  }
  if (previous_end != text.size()) scratch.flagged.push_back({{previous_end, text.size()}, invert});
  apply_behavior(behavior, scratch.flagged, scratch.pieces);
}

PreTokenizer PreTokenizer::from_json(const json& spec) {
  if (spec.is_null()) throw Error("pre_tokenizer is missing; only byte-level BPE tokenizers are supported");
  std::vector<json> steps;
  const std::string type = spec.at("type").get<std::string>();
  if (type == "Sequence")
    steps = spec.at("pretokenizers").get<std::vector<json>>();
  else
    steps.push_back(spec);

  PreTokenizer result;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string step_type = steps[i].at("type").get<std::string>();
    const bool last = i + 1 == steps.size();
    if (step_type == "Split" && !last) {
      result.steps_.push_back(parse_split(steps[i]));
    } else if (step_type == "ByteLevel" && last) {
      check_byte_level(steps[i]);
    } else if (step_type == "Split" || step_type == "ByteLevel") {
      throw Error("pre_tokenizer: only Split steps followed by one final ByteLevel step are supported");
    } else {
      throw Error(fmt::format("pre_tokenizer type '{}' is not supported (only Split and ByteLevel)", step_type));
    }
  }
  if (steps.empty()) throw Error("pre_tokenizer: an empty Sequence has no ByteLevel step; only byte-level BPE is supported");
  return result;
}

void PreTokenizer::for_each_piece(std::string_view text, const std::function<void(std::string_view)>& on_piece) const {
  std::vector<SplitStep::Scratch> scratch(steps_.size());
  apply(0, text, scratch, on_piece);
}

void PreTokenizer::apply(std::size_t step, std::string_view text, std::vector<SplitStep::Scratch>& scratch,
                         const std::function<void(std::string_view)>& on_piece) const {
  if (text.empty()) return;
  if (step == steps_.size()) {
    on_piece(text);
    return;
  }
  const SplitStep& split = steps_[step];
  if (split.behavior == SplitBehavior::Isolated) {
    // Every match and every gap is a piece of its own, so each goes on as soon as it is found.
    std::size_t previous_end = 0;
    Regex::Matches matches(split.pattern, text);
    for (Span m; matches.next(m);) {
      apply(step + 1, text.substr(previous_end, m.begin - previous_end), scratch, on_piece);
      apply(step + 1, text.substr(m.begin, m.end - m.begin), scratch, on_piece);
      previous_end = m.end;
    }
    apply(step + 1, text.substr(previous_end), scratch, on_piece);
    return;
  }
  split.split(text, scratch[step]);
  for (const Span& piece : scratch[step].pieces)
    apply(step + 1, text.substr(piece.begin, piece.end - piece.begin), scratch, on_piece);
}

}  // namespace frank::model::tok
