#include "llm/unicode.h"

#include <algorithm>

namespace tern::llm {
namespace {
struct CodeRange {
  char32_t lo, hi;
};
#include "llm/unicode_tables.inc"

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

}  // namespace tern::llm
