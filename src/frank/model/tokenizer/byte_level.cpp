#include "frank/model/tokenizer/byte_level.h"

#include <array>

#include "frank/model/tokenizer/utf8.h"

namespace frank::model::tok {
namespace {

// Every alphabet character lies below U+0144 (256 bytes, 68 of them moved to U+0100 + n).
constexpr char32_t kAlphabetEnd = 0x144;

// bytes_to_unicode() of GPT-2's encoder.py, both ways.
struct Alphabet {
  std::array<char32_t, 256> char_of_byte{};
  std::array<int16_t, kAlphabetEnd> byte_of_char{};  // -1: not in the alphabet

  Alphabet() {
    byte_of_char.fill(-1);
    char32_t next_moved = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char_of_byte[b] = printable ? static_cast<char32_t>(b) : next_moved++;
      byte_of_char[char_of_byte[b]] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet kAlphabet;

}  // namespace

std::string byte_level_spelling(uint8_t b) {
  std::string spelling;
  append_code_point(spelling, kAlphabet.char_of_byte[b]);
  return spelling;
}

std::string byte_level_decode(std::string_view token) {
  std::string bytes;
  std::size_t pos = 0;
  while (pos < token.size()) {
    const char32_t c = next_code_point(token, pos);
    if (c >= kAlphabetEnd || kAlphabet.byte_of_char[c] < 0) return std::string(token);
    bytes += static_cast<char>(kAlphabet.byte_of_char[c]);
  }
  return bytes;
}

}  // namespace frank::model::tok
