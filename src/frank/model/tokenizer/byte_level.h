#pragma once
// GPT-2's byte-level alphabet, as HuggingFace tokenizers' ByteLevel pre-tokenizer and decoder use
// it: each of the 256 bytes is shown as one printable character (printable Latin-1 bytes as
// themselves, the others as U+0100 + n), so vocab entries are strings like "Ġthe" for " the".
#include <cstdint>
#include <string>
#include <string_view>

namespace frank::model::tok {

// The alphabet character of byte b, as UTF-8 (the vocab's spelling of the single byte b).
std::string byte_level_spelling(uint8_t b);

// The raw bytes a vocab string stands for. Like HF's ByteLevel decoder, a string with any
// character outside the alphabet (e.g. "<｜User｜>") stands for its own UTF-8.
std::string byte_level_decode(std::string_view token);

}  // namespace frank::model::tok
