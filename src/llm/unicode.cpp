#include "llm/unicode.h"

#include <algorithm>

namespace tern::llm {
namespace {
struct CodeRange {
  char32_t lo, hi;
};
struct CodeMapping {  // code point → `len` code points from `at` in the mapping's text
  char32_t cp;
  uint16_t at;
  uint8_t len;
};
struct LowercaseRun {  // first..last, every `stride`-th code point, lowercases to itself + delta
  char32_t first, last;
  int32_t delta;
  uint8_t stride;
};
#include "llm/unicode_classes.inc"
#include "llm/unicode_mappings.inc"

template <size_t N, size_t T>
void append_mapped(const CodeMapping (&table)[N], const char32_t (&text)[T], char32_t c, std::vector<char32_t>& out) {
  auto it = std::lower_bound(std::begin(table), std::end(table), c, [](const CodeMapping& m, char32_t v) { return m.cp < v; });
  if (it == std::end(table) || it->cp != c) return out.push_back(c);
  out.insert(out.end(), text + it->at, text + it->at + it->len);
}

template <size_t N>
bool in(const CodeRange (&table)[N], char32_t c) {
  auto it = std::upper_bound(std::begin(table), std::end(table), c, [](char32_t v, const CodeRange& r) { return v < r.lo; });
  return it != std::begin(table) && c <= (it - 1)->hi;
}
}  // namespace

std::vector<char32_t> utf8_decode(const std::string& s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; ok && k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      ok = (d & 0xC0) == 0x80;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (!ok) {  // keep the raw byte so nothing is lost
      out.push_back(c);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string utf8_encode(char32_t c) {
  std::string s;
  if (c < 0x80) s += static_cast<char>(c);
  else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

std::string utf8_encode(const std::vector<char32_t>& cs, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < std::min(to, cs.size()); ++i) s += utf8_encode(cs[i]);
  return s;
}

bool is_letter(char32_t c) { return in(kLetterRanges, c); }
bool is_number(char32_t c) { return in(kNumberRanges, c); }
bool is_whitespace(char32_t c) { return in(kSpaceRanges, c); }
bool is_punctuation(char32_t c) { return in(kPunctuationRanges, c); }
bool is_nonspacing_mark(char32_t c) { return in(kNonspacingMarkRanges, c); }
bool is_other(char32_t c) { return in(kOtherRanges, c); }

void append_decomposition(char32_t c, std::vector<char32_t>& out) {
  // Hangul syllables (11,172 of them) by the Unicode standard's formula (3.12) rather than a table.
  constexpr char32_t kS = 0xAC00, kL = 0x1100, kV = 0x1161, kT = 0x11A7, kVCount = 21, kTCount = 28, kCount = 11172;
  if (c >= kS && c < kS + kCount) {
    const char32_t i = c - kS;
    out.push_back(kL + i / (kVCount * kTCount));
    out.push_back(kV + i % (kVCount * kTCount) / kTCount);
    if (i % kTCount != 0) out.push_back(kT + i % kTCount);
    return;
  }
  append_mapped(kDecomposition, kDecompositionText, c, out);
}
void append_lowercase(char32_t c, std::vector<char32_t>& out) {
  const auto* special =
      std::lower_bound(std::begin(kLowercase), std::end(kLowercase), c, [](const CodeMapping& m, char32_t v) { return m.cp < v; });
  if (special != std::end(kLowercase) && special->cp == c) return append_mapped(kLowercase, kLowercaseText, c, out);
  auto it = std::upper_bound(std::begin(kLowercaseRuns), std::end(kLowercaseRuns), c,
                             [](char32_t v, const LowercaseRun& r) { return v < r.first; });
  if (it != std::begin(kLowercaseRuns) && c <= (--it)->last && (c - it->first) % it->stride == 0)
    return out.push_back(static_cast<char32_t>(static_cast<int32_t>(c) + it->delta));
  out.push_back(c);
}

}  // namespace tern::llm
