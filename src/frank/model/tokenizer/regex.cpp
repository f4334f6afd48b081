#include "frank/model/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include "frank/core/error.h"

namespace frank::model::tok {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Match data and a JIT stack per thread: matching allocates nothing, and the compiled code stays
// shareable between threads. 32 KiB to 1 MiB of JIT stack covers the backtracking of long
// whitespace runs against `\s+(?!\S)`.
struct ThreadMatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
  ThreadMatchState() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& match_state() {
  thread_local ThreadMatchState state;
  return state;
}

// Oniguruma (HF's regex engine) and PCRE2 read most syntax alike, but not all of it. \s is
// Unicode White_Space in Oniguruma; PCRE2 adds U+180E, so \s and \S are spelled as the property.
// \w, \b, \h and POSIX classes differ in ways no PCRE2 spelling reproduces (Oniguruma's \w even
// differs from its own [\w]), so a pattern with them is refused rather than split differently.
std::string pcre2_pattern_from_oniguruma(std::string_view pattern) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.compare(i, 2, "[:") == 0)
      throw Error(fmt::format("tokenizer regex '{}': POSIX classes ([:...:]) are not supported", pattern));
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char escaped = pattern[++i];
    if (escaped == 's') {
      out += "\\p{White_Space}";
    } else if (escaped == 'S') {
      out += "\\P{White_Space}";
    } else if (std::string_view("wWbBhH").find(escaped) != std::string_view::npos) {
      throw Error(fmt::format("tokenizer regex '{}': \\{} means different things in Oniguruma (HF) and PCRE2; not supported",
                              pattern, escaped));
    } else {
      out += '\\';
      out += escaped;
    }
  }
  return out;
}

std::size_t utf8_length_at(std::string_view s, std::size_t pos) {
  const auto b = static_cast<unsigned char>(s[pos]);
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern, bool literal) : pattern_(pattern) {
  // UCP: \s, \d, \w and POSIX classes follow Unicode properties, as in Oniguruma.
  // MULTILINE: Oniguruma's Ruby syntax (HF's default) makes ^ and $ line anchors.
  const uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  const std::string source = literal ? std::string(pattern) : pcre2_pattern_from_oniguruma(pattern);
  auto code = std::make_shared<Code>();
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options, &error,
                             &error_offset, nullptr);
  if (!code->code)
    throw Error(fmt::format("tokenizer regex '{}' does not compile: {} (at offset {})", pattern, pcre2_message(error),
                            error_offset));
  // Without JIT (an unsupported CPU) PCRE2's interpreter gives the same matches, only slower.
  code->jit = pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE) == 0;
  code_ = std::move(code);
}

bool Regex::find(std::string_view subject, std::size_t from, Span& match) const {
  ThreadMatchState& state = match_state();
  // PCRE2 10.42 rejects a null subject even when it is empty.
  const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.empty() ? "" : subject.data());
  // pcre2_jit_match skips the argument checks of pcre2_match; the subject was validated once.
  const int rc = code_->jit ? pcre2_jit_match(code_->code, data, subject.size(), from, 0, state.data, state.context)
                            : pcre2_match(code_->code, data, subject.size(), from, PCRE2_NO_UTF_CHECK, state.data,
                                          state.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) throw Error(fmt::format("tokenizer regex '{}' failed: {}", pattern_, pcre2_message(rc)));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
  match = {ovector[0], ovector[1]};
  return true;
}

bool Regex::Matches::next(Span& match) {
  while (search_from_ <= subject_.size()) {
    if (!regex_.find(subject_, search_from_, match)) return false;
    if (match.begin == match.end && match.begin == search_from_ && previous_ended_here_) {
      // Oniguruma's find_iter: no empty match where the previous one ended; step one character.
      if (search_from_ == subject_.size()) return false;
      search_from_ += utf8_length_at(subject_, search_from_);
      previous_ended_here_ = false;
      continue;
    }
    search_from_ = match.end;
    previous_ended_here_ = true;
    return true;
  }
  return false;
}

bool Regex::matches_whole(std::string_view subject) const {
  ThreadMatchState& state = match_state();
  const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(subject.empty() ? "" : subject.data()), subject.size(), 0,
                             PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED | PCRE2_ENDANCHORED, state.data, state.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) throw Error(fmt::format("tokenizer regex '{}' failed: {}", pattern_, pcre2_message(rc)));
  return true;
}

std::string regex_unicode_version() {
  char version[32] = {};
  pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, version);
  return version;
}

}  // namespace frank::model::tok
