#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

#include "llm/jinja/syntax.h"

namespace tern::llm::jinja {

[[noreturn]] void syntax(const std::string& what, int line, const std::string& msg) { fail(what, " line ", line, ": ", msg); }

// Splits the source into text, {{ }} and {% %} pieces with jinja2's whitespace rules as transformers sets them:
// `-` strips all whitespace on its side, lstrip_blocks strips the spaces and tabs before a {% or {# that begins its
// line, trim_blocks drops the newline right after a %} or #} (`+` turns either off for its side).
std::vector<Piece> split(const std::string& src, const std::string& what) {
  std::vector<Piece> out;
  size_t pos = 0;
  int line = 1;
  bool trim_next_newline = false, strip_next = false;
  const auto count_lines = [&](size_t from, size_t to) {
    line += static_cast<int>(std::count(src.begin() + static_cast<long>(from), src.begin() + static_cast<long>(to), '\n'));
  };
  const auto push_text = [&](std::string text) {
    if (strip_next) text = strip_chars(text, kSpace, true, false);
    else if (trim_next_newline) {
      if (text.rfind("\r\n", 0) == 0) text.erase(0, 2);
      else if (!text.empty() && text[0] == '\n') text.erase(0, 1);
    }
    strip_next = trim_next_newline = false;
    out.push_back({Piece::Text, std::move(text), line});
  };
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' && src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open == std::string::npos || open + 1 >= src.size()) {
      push_text(src.substr(pos));
      break;
    }
    std::string text = src.substr(pos, open - pos);
    const char kind = src[open + 1];
    const char modifier = open + 2 < src.size() ? src[open + 2] : 0;
    const bool block = kind != '{';
    if (modifier == '-') {
      text = strip_chars(text, kSpace, false, true);
    } else if (block && modifier != '+') {  // lstrip_blocks: only when the tag begins its line (or the template)
      const size_t e = text.find_last_not_of(" \t");
      if (e == std::string::npos ? pos == 0 : text[e] == '\n') text.erase(e == std::string::npos ? 0 : e + 1);
    }
    push_text(std::move(text));
    count_lines(pos, open);
    const int tag_line = line;
    // The tag's end, outside string literals.
    const std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t p = open + 2, end = std::string::npos;
    char quote = 0;
    for (; p < src.size(); ++p) {
      const char c = src[p];
      if (kind == '#') {
        if (src.compare(p, 2, close) == 0) {
          end = p;
          break;
        }
        continue;
      }
      if (quote) {
        if (c == '\\') ++p;
        else if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') quote = c;
      else if (src.compare(p, 2, close) == 0) {
        end = p;
        break;
      }
    }
    if (end == std::string::npos) syntax(what, tag_line, "'{" + std::string(1, kind) + "' is never closed by '" + close + "'");
    size_t body_begin = open + 2 + (modifier == '-' || modifier == '+' ? 1 : 0), body_end = end;
    const bool strip_after = body_end > body_begin && src[body_end - 1] == '-';
    const bool keep_newline = body_end > body_begin && src[body_end - 1] == '+';
    if (strip_after || keep_newline) --body_end;
    std::string body = src.substr(body_begin, body_end - body_begin);
    count_lines(open, end + 2);
    pos = end + 2;
    strip_next = strip_after;
    trim_next_newline = block && !strip_after && !keep_newline;
    if (kind == '#') continue;
    if (kind == '{') {
      out.push_back({Piece::Expr, body, tag_line});
      continue;
    }
    // {% raw %}: the text up to {% endraw %}, verbatim.
    const size_t first = body.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && body.compare(first, 3, "raw") == 0 &&
        body.find_first_not_of(" \t\r\n", first + 3) == std::string::npos) {
      size_t search = pos;
      for (;;) {
        const size_t t = src.find("{%", search);
        if (t == std::string::npos) syntax(what, tag_line, "{% raw %} is never closed by {% endraw %}");
        size_t q = t + 2;
        if (q < src.size() && (src[q] == '-' || src[q] == '+')) ++q;
        while (q < src.size() && std::isspace(static_cast<unsigned char>(src[q]))) ++q;
        if (src.compare(q, 6, "endraw") == 0) {
          std::string raw = src.substr(pos, t - pos);
          if (src[t + 2] == '-') raw = strip_chars(raw, kSpace, false, true);
          push_text(std::move(raw));
          const size_t close_at = src.find("%}", q);
          if (close_at == std::string::npos) syntax(what, tag_line, "{% endraw is never closed");
          strip_next = src[close_at - 1] == '-';
          trim_next_newline = !strip_next && src[close_at - 1] != '+';
          count_lines(pos, close_at + 2);
          pos = close_at + 2;
          break;
        }
        search = t + 2;
      }
      continue;
    }
    out.push_back({Piece::Stmt, body, tag_line});
  }
  return out;
}

std::vector<Token> tokenize(const std::string& s, const std::string& what, int line) {
  std::vector<Token> out;
  size_t p = 0;
  while (p < s.size()) {
    const char c = s[p];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++p;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = p;
      while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
      out.push_back({Token::Name, s.substr(p, e - p)});
      p = e;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t e = p;
      bool is_float = false;
      while (e < s.size() && (std::isdigit(static_cast<unsigned char>(s[e])) || s[e] == '_' ||
                              (s[e] == '.' && e + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[e + 1]))) ||
                              ((s[e] == 'e' || s[e] == 'E') && e + 1 < s.size()))) {
        if (s[e] == '.' || s[e] == 'e' || s[e] == 'E') {
          is_float = true;
          if ((s[e] == 'e' || s[e] == 'E') && (s[e + 1] == '+' || s[e + 1] == '-')) ++e;
        }
        ++e;
      }
      std::string num = s.substr(p, e - p);
      num.erase(std::remove(num.begin(), num.end(), '_'), num.end());
      Token t{is_float ? Token::Float : Token::Int, num};
      if (is_float) t.f = std::strtod(num.c_str(), nullptr);
      else {
        const auto r = std::from_chars(num.data(), num.data() + num.size(), t.i);
        if (r.ec != std::errc()) syntax(what, line, "number '" + num + "' out of range");
      }
      out.push_back(t);
      p = e;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string v;
      size_t e = p + 1;
      for (; e < s.size() && s[e] != c; ++e) {
        if (s[e] != '\\' || e + 1 >= s.size()) {
          v += s[e];
          continue;
        }
        const char n = s[++e];
        switch (n) {
          case 'n': v += '\n'; break;
          case 't': v += '\t'; break;
          case 'r': v += '\r'; break;
          case '0': v += '\0'; break;
          case '\\': v += '\\'; break;
          case '\'': v += '\''; break;
          case '"': v += '"'; break;
          case 'u':
          case 'x': {
            const size_t digits = n == 'u' ? 4 : 2;
            if (e + digits >= s.size()) syntax(what, line, "a \\" + std::string(1, n) + " escape is cut short");
            unsigned cp = 0;
            for (size_t k = 1; k <= digits; ++k) {
              const char h = s[e + k];
              const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
              if (d < 0) syntax(what, line, "a \\" + std::string(1, n) + " escape needs " + std::to_string(digits) + " hex digits");
              cp = cp * 16 + static_cast<unsigned>(d);
            }
            e += digits;
            if (cp < 0x80) v += static_cast<char>(cp);
            else if (cp < 0x800) v += static_cast<char>(0xC0 | (cp >> 6)), v += static_cast<char>(0x80 | (cp & 0x3F));
            else
              v += static_cast<char>(0xE0 | (cp >> 12)), v += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                  v += static_cast<char>(0x80 | (cp & 0x3F));
            break;
          }
          default: v += '\\', v += n;  // Python keeps an unknown escape as written
        }
      }
      if (e >= s.size()) syntax(what, line, "a string literal is never closed");
      out.push_back({Token::Str, v});
      p = e + 1;
      continue;
    }
    static const char* const ops[] = {"==", "!=", "<=", ">=", "//", "**", "+", "-", "*", "/", "%", "~", "<",
                                      ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
    bool matched = false;
    for (const char* op : ops)
      if (s.compare(p, std::strlen(op), op) == 0) {
        out.push_back({Token::Op, op});
        p += std::strlen(op);
        matched = true;
        break;
      }
    if (!matched) syntax(what, line, std::string("unexpected character '") + c + "'");
  }
  out.push_back({Token::End, ""});
  return out;
}

// The filters and tests the renderer has: a template naming another is refused when it is parsed.
bool known_filter(const std::string& n) {
  static const char* const names[] = {"default", "d",       "safe",       "string",     "trim",       "strip",   "tojson", "length",
                                      "count",   "upper",   "lower",      "title",      "capitalize", "replace", "int",    "float",
                                      "abs",     "round",   "items",      "e",          "escape",     "indent",  "list",   "first",
                                      "last",    "reverse", "join",       "unique",     "sum",        "min",     "max",    "dictsort",
                                      "sort",    "map",     "selectattr", "rejectattr", "select",     "reject"};
  return std::find_if(std::begin(names), std::end(names), [&](const char* x) { return n == x; }) != std::end(names);
}
bool known_test(const std::string& n) {
  static const char* const names[] = {"defined", "undefined", "none",        "string",  "number",   "integer",  "float",
                                      "boolean", "true",      "false",       "mapping", "iterable", "sequence", "callable",
                                      "odd",     "even",      "divisibleby", "eq",      "equalto",  "sameas",   "ne",
                                      "lt",      "gt",        "le",          "ge",      "in",       "lower",    "upper"};
  return std::find_if(std::begin(names), std::end(names), [&](const char* x) { return n == x; }) != std::end(names);
}

}  // namespace tern::llm::jinja
