#include <algorithm>

#include "core/error.h"
#include "llm/hf_tokenizer/steps.h"
#include "llm/unicode.h"

namespace tern::llm {

namespace {

// `s` with each code point replaced by what `f` appends for it (nothing: removed).
template <class F>
std::string map_code_points(const std::string& s, F f) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) f(c, out);
  return utf8_encode(out);
}

#ifndef TERN_MINIMAL
bool is_bert_control(char32_t c) { return c != '\t' && c != '\n' && c != '\r' && is_other(c); }
bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}
void decompose_and_strip_marks(char32_t c, std::vector<char32_t>& out) {
  const size_t from = out.size();
  append_decomposition(c, out);
  out.erase(std::remove_if(out.begin() + static_cast<std::ptrdiff_t>(from), out.end(), is_nonspacing_mark), out.end());
}
#endif

}  // namespace

void read_normalizer(const json& n, std::vector<Normalizer>& steps) {
  each_step(n, "normalizers", [&](const json& n, const std::string& type) {
    if (type == "Prepend") {
      const std::string p = n.at("prepend");
      steps.push_back([p](const std::string& s) { return s.empty() ? s : p + s; });
    } else if (type == "Replace") {
      const std::string from = string_pattern(n, "normalizer"), to = n.at("content");
      steps.push_back([from, to](const std::string& s) { return replace_all(s, from, to, "normalizer Replace"); });
    } else if (type == "NFC" || type == "NFKC") {
      // Composition is the identity on already-composed text (what users type and files hold);
      // tern does not recompose decomposed input.
    } else if (type == "Lowercase") {
      steps.push_back([](const std::string& s) { return map_code_points(s, append_lowercase); });
#ifdef TERN_MINIMAL  // (their helpers and the decomposition table are not compiled at all)
    } else if (type == "NFD" || type == "StripAccents" || type == "BertNormalizer") {
      encoder_piece("normalizer", type);
#else
    } else if (type == "NFD") {
      steps.push_back([](const std::string& s) { return map_code_points(s, append_decomposition); });
    } else if (type == "StripAccents") {  // (after NFD, as tokenizer.json files pair them)
      steps.push_back([](const std::string& s) {
        return map_code_points(s, [](char32_t c, std::vector<char32_t>& out) {
          if (!is_nonspacing_mark(c)) out.push_back(c);
        });
      });
    } else if (type == "BertNormalizer") {
      // Controls removed and whitespace made spaces; CJK ideographs spaced apart (each becomes a word); accents
      // stripped (NFD, then the nonspacing marks removed: unset follows lowercase); lowercase.
      const bool clean = n.value("clean_text", true), cjk = n.value("handle_chinese_chars", true), lower = n.value("lowercase", true);
      const json& sa = n.contains("strip_accents") ? n["strip_accents"] : json();
      const bool strip = sa.is_null() ? lower : sa.get<bool>();
      steps.push_back([clean, cjk, strip, lower](const std::string& s) {
        std::vector<char32_t> stripped;
        return map_code_points(s, [&](char32_t c, std::vector<char32_t>& out) {
          if (clean && (c == 0 || c == 0xFFFD || is_bert_control(c))) return;
          if (clean && is_whitespace(c)) c = ' ';
          if (cjk && is_cjk_ideograph(c)) {
            out.insert(out.end(), {U' ', c, U' '});
            return;
          }
          stripped.clear();
          if (strip) decompose_and_strip_marks(c, stripped);
          else stripped.push_back(c);
          for (char32_t d : stripped) {
            if (lower) append_lowercase(d, out);
            else out.push_back(d);
          }
        });
      });
#endif
    } else {
      fail_unsupported("tokenizer.json: normalizer '", type, "' is not supported");
    }
  });
}

}  // namespace tern::llm
