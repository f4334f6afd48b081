#include "frank/model/tokenizer.h"

#include <fmt/format.h>

#include "frank/core/error.h"
#include "frank/model/tokenizer/tokenizer_data.h"
#include "frank/model/tokenizer/utf8.h"

namespace frank::model {

Tokenizer::Tokenizer(std::unique_ptr<const tok::TokenizerData> data) : data_(std::move(data)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::filesystem::path& tokenizer_json) {
  return Tokenizer(std::make_unique<const tok::TokenizerData>(tok::read_tokenizer_file(tokenizer_json)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view utf8_text, bool add_bos) const {
  if (const std::size_t bad = tok::find_invalid_utf8(utf8_text); bad != tok::kValidUtf8)
    throw Error(fmt::format("encode: the text is not valid UTF-8 (byte {} of {}: 0x{:02X})", bad, utf8_text.size(),
                            static_cast<uint8_t>(utf8_text[bad])));
  std::vector<int32_t> ids;
  ids.reserve(utf8_text.size() / 3 + 1);
  if (add_bos) ids.push_back(bos_id());
  std::vector<tok::Segment> segments;
  data_->added_tokens.split(utf8_text, segments);
  const auto encode_piece = [&](std::string_view piece) { data_->encoder.encode(piece, ids); };
  for (const tok::Segment& segment : segments) {
    if (segment.token_id >= 0)
      ids.push_back(segment.token_id);
    else
      data_->pre_tokenizer.for_each_piece(segment.text, encode_piece);
  }
  return ids;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !data_->id_exists[id])
    throw Error(fmt::format("token id {} is not in the vocabulary (ids 0..{})", id, vocab_size() - 1));
  return data_->bytes_by_id[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (const int32_t id : ids) {
    const std::string& piece = token_bytes(id);
    if (!(skip_special && data_->id_is_special[id])) bytes += piece;
  }
  std::string text;
  tok::append_utf8_lossy(text, bytes, /*final=*/true);
  return text;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  const auto it = data_->ids_by_token.find(std::string(token));
  if (it == data_->ids_by_token.end()) return std::nullopt;
  return it->second;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(data_->bytes_by_id.size()); }

int32_t Tokenizer::bos_id() const {
  if (!data_->bos_id) throw Error("this tokenizer names no BOS token (no tokenizer_config.json bos_token)");
  return *data_->bos_id;
}

int32_t Tokenizer::eos_id() const {
  if (!data_->eos_id) throw Error("this tokenizer names no EOS token (no tokenizer_config.json eos_token)");
  return *data_->eos_id;
}

}  // namespace frank::model
