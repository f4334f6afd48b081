#include "frank/model/tokenizer/utf8.h"

#include <cstdint>
#include <cstring>

namespace frank::model::tok {
namespace {

enum class StepKind { Complete, Invalid, Truncated };

struct Step {
  StepKind kind;
  std::size_t length;  // Complete: sequence length; Invalid: bytes of the maximal subpart; Truncated: bytes present
};

// Classifies the sequence starting at bytes[pos] (Unicode Table 3-7, well-formed byte sequences).
Step step_at(std::string_view bytes, std::size_t pos) {
  const auto b0 = static_cast<uint8_t>(bytes[pos]);
  if (b0 < 0x80) return {StepKind::Complete, 1};
  std::size_t continuation;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    continuation = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    continuation = 2;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong 3-byte forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    continuation = 3;
    if (b0 == 0xF0) lo = 0x90;  // no overlong 4-byte forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {StepKind::Invalid, 1};
  }
  for (std::size_t k = 1; k <= continuation; ++k) {
    if (pos + k >= bytes.size()) return {StepKind::Truncated, k};
    const auto b = static_cast<uint8_t>(bytes[pos + k]);
    if (b < lo || b > hi) return {StepKind::Invalid, k};
    lo = 0x80;
    hi = 0xBF;
  }
  return {StepKind::Complete, continuation + 1};
}

// Length of the ASCII run at bytes[pos], eight bytes at a time: most text is mostly ASCII.
std::size_t ascii_run(std::string_view bytes, std::size_t pos) {
  const std::size_t start = pos;
  while (pos + 8 <= bytes.size()) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + pos, 8);
    if (word & 0x8080808080808080ull) break;
    pos += 8;
  }
  while (pos < bytes.size() && static_cast<uint8_t>(bytes[pos]) < 0x80) ++pos;
  return pos - start;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

std::size_t find_invalid_utf8(std::string_view bytes) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    pos += ascii_run(bytes, pos);
    if (pos == bytes.size()) break;
    const Step s = step_at(bytes, pos);
    if (s.kind != StepKind::Complete) return pos;
    pos += s.length;
  }
  return kValidUtf8;
}

std::size_t append_utf8_lossy(std::string& out, std::string_view bytes, bool final) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const std::size_t ascii = ascii_run(bytes, pos);
    out.append(bytes.substr(pos, ascii));
    pos += ascii;
    if (pos == bytes.size()) break;
    const Step s = step_at(bytes, pos);
    if (s.kind == StepKind::Complete) {
      out.append(bytes.substr(pos, s.length));
    } else if (s.kind == StepKind::Invalid || final) {
      out.append(kReplacement);
    } else {
      return pos;  // Truncated and more bytes may come
    }
    pos += s.length;
  }
  return pos;
}

char32_t next_code_point(std::string_view bytes, std::size_t& pos) {
  const auto b0 = static_cast<uint8_t>(bytes[pos]);
  const std::size_t length = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
  char32_t cp = length == 1 ? b0 : length == 2 ? (b0 & 0x1F) : length == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (std::size_t k = 1; k < length; ++k) cp = (cp << 6) | (static_cast<uint8_t>(bytes[pos + k]) & 0x3F);
  pos += length;
  return cp;
}

void append_code_point(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace frank::model::tok
