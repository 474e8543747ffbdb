#include "llm/hf_tokenizer/steps.h"

#include <cctype>

#include "core/error.h"
#include "llm/unicode.h"

namespace tern::llm {

const ByteMap& byte_map() {
  static ByteMap m;
  return m;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, const char* where) {
  if (from.empty()) return s;
  size_t count = 0;
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += from.size()) ++count;
  if (count == 0) return s;
  const size_t size = s.size() - count * from.size() + count * to.size();
  if (size > text_budget(s.size()))
    fail("tokenizer.json: its ", where, " would turn ", s.size(), " bytes into ", size, " (more than ", text_budget(s.size()), ")");
  std::string out;
  out.reserve(size);
  size_t last = 0;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, last)) {
    out.append(s, last, at - last).append(to);
    last = at + from.size();
  }
  return out.append(s, last, std::string::npos);
}

std::string string_pattern(const json& step, const char* where) {
  if (step.contains("pattern") && step["pattern"].contains("String")) return step["pattern"]["String"];
  fail_unsupported("tokenizer.json: ", where, " Replace with a regex pattern is not supported");
}

bool is_bert_punctuation(char32_t c) { return (c < 0x80 && std::ispunct(static_cast<int>(c))) || is_punctuation(c); }

#ifdef TERN_MINIMAL
[[noreturn]] void encoder_piece(const char* kind, const std::string& type) {
  fail_unsupported("tokenizer.json: ", kind, " '", type, "' is not in this build (TERN_MINIMAL leaves sentence encoders' pieces out)");
}
#endif

}  // namespace tern::llm
