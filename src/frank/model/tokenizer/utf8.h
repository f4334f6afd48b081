#pragma once
// UTF-8 validation and lossy decoding for the tokenizer. The lossy rule is the one HuggingFace
// tokenizers' ByteLevel decoder gets from Rust's String::from_utf8_lossy (and WHATWG): every
// maximal ill-formed subpart becomes one U+FFFD. The streaming detokenizer uses the same function
// with `final = false`, so its output concatenates to exactly what a one-shot decode returns.
#include <cstddef>
#include <string>
#include <string_view>

namespace frank::model::tok {

inline constexpr std::size_t kValidUtf8 = std::string_view::npos;

// Byte offset of the first byte that does not start a well-formed sequence, or kValidUtf8.
std::size_t find_invalid_utf8(std::string_view bytes);

// Appends `bytes` to `out`, replacing ill-formed subparts with U+FFFD. When `final` is false an
// incomplete (but so far well-formed) sequence at the end is not consumed, because later bytes
// may complete it. Returns how many bytes were consumed.
std::size_t append_utf8_lossy(std::string& out, std::string_view bytes, bool final);

// The code point of the well-formed sequence at bytes[pos]; advances pos past it.
char32_t next_code_point(std::string_view bytes, std::size_t& pos);

void append_code_point(std::string& out, char32_t cp);

}  // namespace frank::model::tok
