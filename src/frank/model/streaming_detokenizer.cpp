// StreamingDetokenizer (declared in tokenizer.h): holds back the bytes of an unfinished UTF-8
// character until the ids that complete it arrive.
#include "frank/model/tokenizer.h"
#include "frank/model/tokenizer/utf8.h"

namespace frank::model {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

std::string StreamingDetokenizer::push(int32_t id) {
  pending_ += tokenizer_->token_bytes(id);
  std::string text;
  pending_.erase(0, tok::append_utf8_lossy(text, pending_, /*final=*/false));
  return text;
}

std::string StreamingDetokenizer::flush() {
  std::string text;
  tok::append_utf8_lossy(text, pending_, /*final=*/true);
  pending_.clear();
  return text;
}

}  // namespace frank::model
