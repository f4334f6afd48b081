// --draft-tokens for `frank generate` and `frank serve`.
#include <fmt/format.h>

#include "commands.h"
#include "frank/core/error.h"
#include "frank/server/engine_worker.h"

namespace frank::cli {

int parse_draft_tokens(const std::string& text) {
  if (text == "auto") return server::kAutoDraftTokens;
  try {
    size_t used = 0;
    const int k = std::stoi(text, &used);
    if (used == text.size() && k >= 0 && k <= 16) return k;
  } catch (const std::exception&) {
  }
  throw Error(fmt::format("--draft-tokens: '{}' is neither a count 0..16 nor 'auto'", text));
}

}  // namespace frank::cli
