#include "frank/model/tokenizer/added_tokens.h"

#include <algorithm>

#include "frank/model/tokenizer/utf8.h"

namespace frank::model::tok {
namespace {

// The character ending at `end` (exclusive), as a view; text[..end] is valid UTF-8 and non-empty.
std::string_view char_before(std::string_view text, std::size_t end) {
  std::size_t begin = end - 1;
  while (begin > 0 && (static_cast<uint8_t>(text[begin]) & 0xC0) == 0x80) --begin;
  return text.substr(begin, end - begin);
}

std::string_view char_at(std::string_view text, std::size_t pos) {
  std::size_t next = pos;
  next_code_point(text, next);
  return text.substr(pos, next - pos);
}

}  // namespace

void AddedTokenMatcher::Trie::insert(std::string_view content, int32_t token_index) {
  int32_t node = 0;
  for (const char c : content) {
    const auto byte = static_cast<uint8_t>(c);
    auto& children = nodes_[node].children;
    auto it = std::find_if(children.begin(), children.end(), [&](const auto& edge) { return edge.first == byte; });
    if (it != children.end()) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(nodes_.size());
      nodes_[node].children.emplace_back(byte, child);
      nodes_.emplace_back();
      node = child;
    }
  }
  first_byte_[static_cast<uint8_t>(content[0])] = true;
  // HF builds its automaton from all tokens in order; for equal contents the first one wins.
  if (nodes_[node].token_index < 0) nodes_[node].token_index = token_index;
}

std::pair<std::size_t, int32_t> AddedTokenMatcher::Trie::longest_at(std::string_view text, std::size_t pos) const {
  std::pair<std::size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<uint8_t>(text[i]);
    const auto& children = nodes_[node].children;
    auto it = std::find_if(children.begin(), children.end(), [&](const auto& edge) { return edge.first == byte; });
    if (it == children.end()) break;
    node = it->second;
    if (nodes_[node].token_index >= 0) best = {i + 1 - pos, nodes_[node].token_index};
  }
  return best;
}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens)
    : tokens_(tokens),
      word_char_(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])", false),
      white_space_(R"(\p{White_Space})", false) {
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;  // HF ignores empty added tokens
    (tokens_[i].normalized ? normalized_ : raw_).insert(tokens_[i].content, static_cast<int32_t>(i));
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& segments) const {
  segments.clear();
  std::vector<Segment> first_pass;
  split_with(raw_, text, first_pass);
  for (const Segment& segment : first_pass) {
    if (segment.token_id >= 0)
      segments.push_back(segment);
    else
      split_with(normalized_, segment.text, segments);
  }
}

// HF's AddedVocabulary::find_matches over one group of tokens.
void AddedTokenMatcher::split_with(const Trie& trie, std::string_view text, std::vector<Segment>& segments) const {
  auto plain = [&](std::size_t begin, std::size_t end) {
    if (begin < end) segments.push_back({text.substr(begin, end - begin), -1});
  };
  std::size_t emitted_up_to = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.may_start_with(static_cast<uint8_t>(text[pos]))) {
      ++pos;
      continue;
    }
    const auto [length, index] = trie.longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    std::size_t start = pos;
    std::size_t stop = pos + length;
    pos = stop;  // the automaton resumes after the match, whether or not it is kept
    const AddedToken& token = tokens_[index];
    if (token.single_word) {
      const bool word_before = start > 0 && word_char_.matches_whole(char_before(text, start));
      const bool word_after = stop < text.size() && word_char_.matches_whole(char_at(text, stop));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      std::size_t strip_from = start;
      while (strip_from > 0 && white_space_.matches_whole(char_before(text, strip_from)))
        strip_from -= char_before(text, strip_from).size();
      start = std::max(strip_from, emitted_up_to);  // spaces an earlier token took stay with it
    }
    if (token.rstrip) {
      while (stop < text.size() && white_space_.matches_whole(char_at(text, stop))) stop += char_at(text, stop).size();
    }
    plain(emitted_up_to, start);
    segments.push_back({text.substr(start, stop - start), token.id});
    emitted_up_to = stop;
  }
  plain(emitted_up_to, text.size());
}

}  // namespace frank::model::tok
