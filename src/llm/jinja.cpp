#include "llm/jinja.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <map>
#include <vector>

#include "core/error.h"

namespace tern::llm::jinja {

namespace {

// ---- values ----------------------------------------------------------------------------------------------

struct Value;
using ValueList = std::vector<Value>;
struct Dict;
struct Args {
  std::vector<Value>* positional;
  std::vector<std::pair<std::string, Value>>* named;
};
using Function = std::function<Value(Args)>;

struct Value {
  enum Kind { Undefined, None, Bool, Int, Float, String, List, Map, Callable } kind = Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<ValueList> list;
  std::shared_ptr<Dict> map;
  std::shared_ptr<Function> fn;
  std::string name;  // an undefined value's name (for the error), a function's

  static Value none() { return make(None); }
  static Value boolean(bool v) {
    Value x = make(Bool);
    x.b = v;
    return x;
  }
  static Value integer(int64_t v) {
    Value x = make(Int);
    x.i = v;
    return x;
  }
  static Value number(double v) {
    Value x = make(Float);
    x.f = v;
    return x;
  }
  static Value string(std::string v) {
    Value x = make(String);
    x.s = std::move(v);
    return x;
  }
  static Value of_list(ValueList v) {
    Value x = make(List);
    x.list = std::make_shared<ValueList>(std::move(v));
    return x;
  }
  static Value function(std::string name, Function f) {
    Value x = make(Callable);
    x.name = std::move(name);
    x.fn = std::make_shared<Function>(std::move(f));
    return x;
  }
  static Value undefined(std::string name) {
    Value x;
    x.name = std::move(name);
    return x;
  }
  static Value make(Kind k) {
    Value x;
    x.kind = k;
    return x;
  }
  bool numeric() const { return kind == Int || kind == Float || kind == Bool; }
  double as_double() const { return kind == Float ? f : kind == Bool ? b : static_cast<double>(i); }
};

// A dict in insertion order (Python's), string keys (JSON's; a template's literal keys are strings too).
// A namespace() is one whose attributes `set` may assign.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;
  Value* find(const std::string& k) {
    for (auto& [key, v] : items)
      if (key == k) return &v;
    return nullptr;
  }
  void set(const std::string& k, Value v) {
    if (Value* p = find(k)) *p = std::move(v);
    else items.emplace_back(k, std::move(v));
  }
};

Value of_map(std::shared_ptr<Dict> d) {
  Value x = Value::make(Value::Map);
  x.map = std::move(d);
  return x;
}

// Nesting past this in a template (expressions, blocks) or in the JSON it is given is refused: the parser and the
// renderer recurse (real chat templates nest under 10).
constexpr int kMaxNesting = 100;

template <class Json>
Value from_json(const Json& j, int depth = 0) {
  if (depth > kMaxNesting) fail("a chat template's value nests deeper than ", kMaxNesting);
  switch (j.type()) {
    case Json::value_t::null: return Value::none();
    case Json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return Value::integer(j.template get<int64_t>());
    case Json::value_t::number_float: return Value::number(j.template get<double>());
    case Json::value_t::string: return Value::string(j.template get<std::string>());
    case Json::value_t::array: {
      ValueList l;
      for (const auto& e : j) l.push_back(from_json(e, depth + 1));
      return Value::of_list(std::move(l));
    }
    case Json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (const auto& [k, v] : j.items()) d->items.emplace_back(k, from_json(v, depth + 1));
      return of_map(std::move(d));
    }
    default: return Value::none();
  }
}

// The most bytes a string the template makes may hold (the output's default limit): what a template builds by
// doubling (x ~ x, a join, a replace, a list's text) is refused here, before it takes the memory.
constexpr size_t kMaxValueBytes = size_t{16} << 20;
void check_size(size_t bytes) {
  if (bytes > kMaxValueBytes) fail("a chat template's value passes ", kMaxValueBytes, " bytes");
}

// Python's repr of a float: the shortest text that reads back, with ".0" on a whole number.
std::string float_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string t(buf, r.ptr);
  if (t.find_first_of(".en") == std::string::npos) t += ".0";
  return t;
}

// json.dumps(..., ensure_ascii=False) of a string: quotes, backslash, control characters escaped.
void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char u[8];
          std::snprintf(u, sizeof u, "\\u%04x", c);
          out += u;
        } else out += static_cast<char>(c);
    }
  }
  out += '"';
}

// json.dumps: separators (", ", ": ") flat, ("," and newlines, ": ") with an indent; keys sorted on request.
void to_json(std::string& out, const Value& v, int indent, bool sort_keys, int depth) {
  const auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.kind) {
    case Value::Undefined:
    case Value::None: out += "null"; return;
    case Value::Bool: out += v.b ? "true" : "false"; return;
    case Value::Int: out += std::to_string(v.i); return;
    case Value::Float: out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f > 0 ? "Infinity" : "-Infinity") : float_text(v.f); return;
    case Value::String: json_string(out, v.s); return;
    case Value::List: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += indent < 0 ? ", " : ",";
        newline(depth + 1);
        to_json(out, (*v.list)[k], indent, sort_keys, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Map: {
      if (v.map->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.map->items) items.push_back(&kv);
      if (sort_keys) std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += indent < 0 ? ", " : ",";
        newline(depth + 1);
        json_string(out, items[k]->first);
        out += ": ";
        to_json(out, items[k]->second, indent, sort_keys, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    case Value::Callable: fail("tojson: a function is not JSON");
  }
}

std::string repr(const Value& v);

// str(v), as Jinja prints a value: Python's str (None, True, 1.0, ['a', 1], {'k': 'v'}); undefined prints nothing.
std::string str(const Value& v) {
  switch (v.kind) {
    case Value::Undefined: return "";
    case Value::None: return "None";
    case Value::Bool: return v.b ? "True" : "False";
    case Value::Int: return std::to_string(v.i);
    case Value::Float: return float_text(v.f);
    case Value::String: return v.s;
    case Value::List: {
      std::string out = "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        out += (k ? ", " : "") + repr((*v.list)[k]);
        check_size(out.size());
      }
      return out + "]";
    }
    case Value::Map: {
      if (v.map->is_namespace) return "<Namespace>";
      std::string out = "{";
      for (size_t k = 0; k < v.map->items.size(); ++k) {
        out += (k ? ", " : "") + repr(Value::string(v.map->items[k].first)) + ": " + repr(v.map->items[k].second);
        check_size(out.size());
      }
      return out + "}";
    }
    case Value::Callable: return "<function " + v.name + ">";
  }
  return "";
}

std::string repr(const Value& v) {
  if (v.kind != Value::String) return str(v);
  const char q = v.s.find('\'') != std::string::npos && v.s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : v.s) {
    if (c == q || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out + q;
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Undefined:
    case Value::None: return false;
    case Value::Bool: return v.b;
    case Value::Int: return v.i != 0;
    case Value::Float: return v.f != 0;
    case Value::String: return !v.s.empty();
    case Value::List: return !v.list->empty();
    case Value::Map: return !v.map->items.empty();
    case Value::Callable: return true;
  }
  return false;
}

bool equal(const Value& a, const Value& b) {
  if (a.numeric() && b.numeric()) return a.as_double() == b.as_double();
  if (a.kind != b.kind) return (a.kind == Value::Undefined || a.kind == Value::None) && a.kind == b.kind;
  switch (a.kind) {
    case Value::String: return a.s == b.s;
    case Value::List:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Value::Map:
      if (a.map->items.size() != b.map->items.size()) return false;
      for (const auto& [k, v] : a.map->items) {
        const Value* o = b.map->find(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    case Value::Callable: return a.fn == b.fn;
    default: return true;  // None == None, Undefined == Undefined
  }
}

// `s` without the leading (left) and trailing (right) bytes that are among `chars`.
std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && chars.find(s[b]) != std::string::npos) ++b;
  if (right)
    while (e > b && chars.find(s[e - 1]) != std::string::npos) --e;
  return s.substr(b, e - b);
}
const char* const kSpace = " \t\r\n";

// ---- the template's pieces --------------------------------------------------------------------------------

struct Piece {
  enum Kind { Text, Expr, Stmt } kind;
  std::string text;
  int line;
};

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

// ---- expressions ------------------------------------------------------------------------------------------

struct Token {
  enum Kind { Name, Str, Int, Float, Op, End } kind;
  std::string text;
  int64_t i = 0;
  double f = 0;
};

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

struct Expr {
  enum Kind { Literal, Name, Attr, Item, Slice, Call, Filter, Test, Neg, Not, Binary, And, Or, Cond, ListLit, DictLit } kind;
  Value value;                              // Literal
  std::string name;                         // Name, Attr, Filter, Test; Binary's operator
  std::vector<std::shared_ptr<Expr>> args;  // operands, call arguments, list items, dict keys and values in turn
  std::vector<std::pair<std::string, std::shared_ptr<Expr>>> kwargs;
  bool negated = false;  // `is not`
  int line = 0;
};
using ExprPtr = std::shared_ptr<Expr>;

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, const std::string& what, int line) : t_(std::move(tokens)), what_(what), line_(line) {}

  ExprPtr expression() {
    ExprPtr e = or_expr();
    if (is_name("if")) {
      ++p_;
      auto c = make(Expr::Cond);
      c->args = {or_expr(), e};
      if (is_name("else")) {
        ++p_;
        c->args.push_back(expression());
      }
      return c;
    }
    return e;
  }
  // An expression without a trailing `if` (a for loop's iterable, before its filter).
  ExprPtr expression_no_cond() { return or_expr(); }
  // A comma-separated tuple at the top (`set a, b = ...`, `for k, v in`): the names.
  std::vector<std::string> target_names() {
    std::vector<std::string> names;
    do names.push_back(name_token());
    while (accept(","));
    return names;
  }
  std::string name_token() {
    if (t_[p_].kind != Token::Name) error("expected a name");
    return t_[p_++].text;
  }
  bool is_name(const char* n) const { return t_[p_].kind == Token::Name && t_[p_].text == n; }
  bool accept(const char* op) {
    if (t_[p_].kind == Token::Op && t_[p_].text == op) {
      ++p_;
      return true;
    }
    return false;
  }
  void expect(const char* op) {
    if (!accept(op)) error(std::string("expected '") + op + "'");
  }
  bool at_end() const { return t_[p_].kind == Token::End; }
  void expect_end() {
    if (!at_end()) error("unexpected '" + t_[p_].text + "'");
  }
  [[noreturn]] void error(const std::string& msg) const {
    syntax(what_, line_, msg + (t_[p_].kind == Token::End ? " at the end" : " at '" + t_[p_].text + "'"));
  }

 private:
  ExprPtr make(Expr::Kind k) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->line = line_;
    return e;
  }
  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Binary);
    e->name = op;
    e->args = {std::move(a), std::move(b)};
    return e;
  }
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      ++p_;
      auto o = make(Expr::Or);
      o->args = {e, and_expr()};
      e = o;
    }
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      ++p_;
      auto o = make(Expr::And);
      o->args = {e, not_expr()};
      e = o;
    }
    return e;
  }
  // Counts one level of nesting while it lives (expressions that hold expressions: parentheses, `not`, unary signs).
  struct Nest {
    explicit Nest(ExprParser& p) : p(p) {
      if (++p.depth_ > kMaxNesting) p.error("the expression nests deeper than " + std::to_string(kMaxNesting));
    }
    ~Nest() { --p.depth_; }
    ExprParser& p;
  };
  ExprPtr not_expr() {
    if (is_name("not")) {
      ++p_;
      const Nest nest(*this);
      auto n = make(Expr::Not);
      n->args = {not_expr()};
      return n;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = math1();
    for (;;) {
      const Token& t = t_[p_];
      if (t.kind == Token::Op && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" || t.text == ">=")) {
        ++p_;
        e = binary(t.text, e, math1());
      } else if (is_name("in")) {
        ++p_;
        e = binary("in", e, math1());
      } else if (is_name("not") && t_[p_ + 1].kind == Token::Name && t_[p_ + 1].text == "in") {
        p_ += 2;
        e = binary("not in", e, math1());
      } else return e;
    }
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (t_[p_].kind == Token::Op && (t_[p_].text == "+" || t_[p_].text == "-")) {
      const std::string op = t_[p_++].text;
      e = binary(op, e, concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (accept("~")) e = binary("~", e, math2());
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = power();
    while (t_[p_].kind == Token::Op && (t_[p_].text == "*" || t_[p_].text == "/" || t_[p_].text == "//" || t_[p_].text == "%")) {
      const std::string op = t_[p_++].text;
      e = binary(op, e, power());
    }
    return e;
  }
  ExprPtr power() {
    ExprPtr e = unary();
    while (accept("**")) e = binary("**", e, unary());
    return e;
  }
  ExprPtr unary() {
    const Nest nest(*this);
    if (accept("-")) {
      auto n = make(Expr::Neg);
      n->args = {unary()};
      return filters(n);
    }
    if (accept("+")) return unary();
    return filters(postfix(primary()));
  }
  void call_args(const ExprPtr& e) {
    if (accept(")")) return;
    do {
      if (t_[p_].kind == Token::Name && t_[p_ + 1].kind == Token::Op && t_[p_ + 1].text == "=") {
        const std::string k = t_[p_].text;
        p_ += 2;
        e->kwargs.emplace_back(k, expression());
      } else e->args.push_back(expression());
    } while (accept(",") && !(t_[p_].kind == Token::Op && t_[p_].text == ")"));
    expect(")");
  }
  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (accept("|")) {
        auto f = make(Expr::Filter);
        f->name = name_token();
        if (!known_filter(f->name)) syntax(what_, line_, "the filter '" + f->name + "' is not supported");
        f->args = {e};
        if (accept("(")) call_args(f);
        e = f;
      } else if (is_name("is")) {
        ++p_;
        auto t = make(Expr::Test);
        if (is_name("not")) {
          ++p_;
          t->negated = true;
        }
        t->name = name_token();
        if (!known_test(t->name)) syntax(what_, line_, "the test '" + t->name + "' is not supported");
        t->args = {e};
        if (accept("(")) call_args(t);
        else if (t_[p_].kind == Token::Str || t_[p_].kind == Token::Int || t_[p_].kind == Token::Float ||
                 (t_[p_].kind == Token::Name && !is_name("and") && !is_name("or") && !is_name("else") && !is_name("if") && !is_name("in") &&
                  !is_name("not") && !is_name("is")))
          t->args.push_back(postfix(primary()));  // `is divisibleby 3`, `is sameas none`
        e = t;
      } else return e;
    }
  }
  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (accept(".")) {
        auto a = make(Expr::Attr);
        if (t_[p_].kind == Token::Int) {  // messages.0
          a->kind = Expr::Item;
          auto idx = make(Expr::Literal);
          idx->value = Value::integer(t_[p_++].i);
          a->args = {e, idx};
        } else {
          a->name = name_token();
          a->args = {e};
        }
        e = a;
      } else if (accept("[")) {
        ExprPtr lo, hi, step;
        bool slice = false;
        if (!(t_[p_].kind == Token::Op && t_[p_].text == ":")) lo = expression();
        if (accept(":")) {
          slice = true;
          if (!(t_[p_].kind == Token::Op && (t_[p_].text == "]" || t_[p_].text == ":"))) hi = expression();
          if (accept(":") && !(t_[p_].kind == Token::Op && t_[p_].text == "]")) step = expression();
        }
        expect("]");
        auto s = make(slice ? Expr::Slice : Expr::Item);
        s->args = {e, lo, hi, step};
        if (!slice) s->args.resize(2);
        e = s;
      } else if (accept("(")) {
        auto c = make(Expr::Call);
        c->args = {e};
        call_args(c);
        e = c;
      } else return e;
    }
  }
  ExprPtr primary() {
    const Token t = t_[p_];
    auto lit = [&](Value v) {
      ++p_;
      auto e = make(Expr::Literal);
      e->value = std::move(v);
      return e;
    };
    switch (t.kind) {
      case Token::Str: {
        std::string s = t.text;
        ++p_;
        while (t_[p_].kind == Token::Str) s += t_[p_++].text;  // adjacent literals join, as in Python
        auto e = make(Expr::Literal);
        e->value = Value::string(std::move(s));
        return e;
      }
      case Token::Int: return lit(Value::integer(t.i));
      case Token::Float: return lit(Value::number(t.f));
      case Token::Name:
        if (t.text == "true" || t.text == "True") return lit(Value::boolean(true));
        if (t.text == "false" || t.text == "False") return lit(Value::boolean(false));
        if (t.text == "none" || t.text == "None") return lit(Value::none());
        {
          ++p_;
          auto e = make(Expr::Name);
          e->name = t.text;
          return e;
        }
      case Token::Op:
        if (t.text == "(") {
          ++p_;
          if (accept(")")) return lit_list();
          ExprPtr e = expression();
          if (accept(",")) {  // a tuple: a list here
            auto l = make(Expr::ListLit);
            l->args.push_back(e);
            while (!accept(")")) {
              l->args.push_back(expression());
              if (!accept(",")) {
                expect(")");
                break;
              }
            }
            return l;
          }
          expect(")");
          return e;
        }
        if (t.text == "[") {
          ++p_;
          auto l = make(Expr::ListLit);
          while (!accept("]")) {
            l->args.push_back(expression());
            if (!accept(",")) {
              expect("]");
              break;
            }
          }
          return l;
        }
        if (t.text == "{") {
          ++p_;
          auto d = make(Expr::DictLit);
          while (!accept("}")) {
            d->args.push_back(expression());
            expect(":");
            d->args.push_back(expression());
            if (!accept(",")) {
              expect("}");
              break;
            }
          }
          return d;
        }
        break;
      case Token::End: break;
    }
    error("expected a value");
  }
  ExprPtr lit_list() { return make(Expr::ListLit); }

  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
  const std::string& what_;
  int line_;
};

// ---- statements -------------------------------------------------------------------------------------------

}  // namespace

struct Node {
  enum Kind { Block, Text, Output, If, For, Set, SetBlock, Macro, Break, Continue } kind = Block;
  std::string text;                             // Text; Set's name (or namespace) and attribute; Macro's name
  std::string attr;                             // `set ns.attr`
  std::vector<std::string> names;               // For's targets; Set's targets; Macro's parameters
  std::vector<std::shared_ptr<Expr>> exprs;     // Output; If's conditions; For's iterable and filter; Set's value; Macro's defaults
  std::vector<std::shared_ptr<Node>> children;  // Block's; If's branches (one per condition, then an else); For's body, else
  int line = 0;
};

namespace {

using NodePtr = std::shared_ptr<Node>;

class TemplateParser {
 public:
  TemplateParser(std::vector<Piece> pieces, const std::string& what) : pieces_(std::move(pieces)), what_(what) {}

  NodePtr parse() {
    std::string end;
    NodePtr root = block({}, end);
    if (!end.empty()) syntax(what_, pieces_[p_ - 1].line, "unexpected {% " + end + " %}");
    return root;
  }

 private:
  static std::string keyword(const std::string& body) {
    const size_t b = body.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    size_t e = b;
    while (e < body.size() && (std::isalnum(static_cast<unsigned char>(body[e])) || body[e] == '_')) ++e;
    return body.substr(b, e - b);
  }
  ExprParser expr_parser(const Piece& piece, size_t skip_keyword) {
    const size_t b = piece.text.find_first_not_of(" \t\r\n");
    return ExprParser(tokenize(piece.text.substr(b + skip_keyword), what_, piece.line), what_, piece.line);
  }
  NodePtr make(Node::Kind k, int line) {
    auto n = std::make_shared<Node>();
    n->kind = k;
    n->line = line;
    return n;
  }

  // Parses pieces into a block until a statement whose keyword is in `ends` (returned in `end`, its piece consumed).
  NodePtr block(const std::vector<std::string>& ends, std::string& end) {
    if (++depth_ > kMaxNesting) syntax(what_, pieces_[p_ - 1].line, "blocks nest deeper than " + std::to_string(kMaxNesting));
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    NodePtr b = make(Node::Block, p_ < pieces_.size() ? pieces_[p_].line : 0);
    while (p_ < pieces_.size()) {
      const Piece& piece = pieces_[p_++];
      if (piece.kind == Piece::Text) {
        if (!piece.text.empty()) {
          auto t = make(Node::Text, piece.line);
          t->text = piece.text;
          b->children.push_back(t);
        }
        continue;
      }
      if (piece.kind == Piece::Expr) {
        auto o = make(Node::Output, piece.line);
        ExprParser ep(tokenize(piece.text, what_, piece.line), what_, piece.line);
        o->exprs = {ep.expression()};
        ep.expect_end();
        b->children.push_back(o);
        continue;
      }
      const std::string kw = keyword(piece.text);
      if (std::find(ends.begin(), ends.end(), kw) != ends.end()) {
        end = kw;
        last_ = &piece;
        return b;
      }
      b->children.push_back(statement(piece, kw));
    }
    end.clear();
    if (!ends.empty()) syntax(what_, pieces_.empty() ? 0 : pieces_.back().line, "{% " + ends.back() + " %} is missing");
    return b;
  }

  NodePtr statement(const Piece& piece, const std::string& kw) {
    std::string end;
    if (kw == "if") {
      auto n = make(Node::If, piece.line);
      ExprParser ep = expr_parser(piece, 2);
      n->exprs.push_back(ep.expression());
      ep.expect_end();
      for (;;) {
        n->children.push_back(block({"elif", "else", "endif"}, end));
        if (end == "endif") return n;
        if (end == "else") {
          n->children.push_back(block({"endif"}, end));
          return n;
        }
        ExprParser ei = expr_parser(*last_, 4);
        n->exprs.push_back(ei.expression());
        ei.expect_end();
      }
    }
    if (kw == "for") {
      auto n = make(Node::For, piece.line);
      ExprParser ep = expr_parser(piece, 3);
      n->names = ep.target_names();
      if (!ep.is_name("in")) ep.error("expected 'in'");
      ep.name_token();
      n->exprs.push_back(ep.expression_no_cond());
      if (ep.is_name("if")) {
        ep.name_token();
        n->exprs.push_back(ep.expression());
      }
      if (ep.is_name("recursive")) ep.error("recursive loops are not supported");
      ep.expect_end();
      n->children.push_back(block({"else", "endfor"}, end));
      if (end == "else") n->children.push_back(block({"endfor"}, end));
      return n;
    }
    if (kw == "set") {
      ExprParser ep = expr_parser(piece, 3);
      std::vector<std::string> names = ep.target_names();
      std::string attr;
      if (names.size() == 1 && ep.accept(".")) attr = ep.name_token();
      if (ep.at_end()) {  // {% set x %}...{% endset %}
        auto n = make(Node::SetBlock, piece.line);
        n->text = names[0];
        n->attr = attr;
        n->children.push_back(block({"endset"}, end));
        return n;
      }
      ep.expect("=");
      auto n = make(Node::Set, piece.line);
      n->names = names;
      n->attr = attr;
      n->exprs.push_back(ep.expression());
      ep.expect_end();
      return n;
    }
    if (kw == "macro") {
      auto n = make(Node::Macro, piece.line);
      ExprParser ep = expr_parser(piece, 5);
      n->text = ep.name_token();
      ep.expect("(");
      while (!ep.accept(")")) {
        n->names.push_back(ep.name_token());
        n->exprs.push_back(ep.accept("=") ? ep.expression() : nullptr);
        if (!ep.accept(",")) {
          ep.expect(")");
          break;
        }
      }
      ep.expect_end();
      n->children.push_back(block({"endmacro"}, end));
      return n;
    }
    if (kw == "break" || kw == "continue") return make(kw == "break" ? Node::Break : Node::Continue, piece.line);
    if (kw == "generation") {  // transformers' assistant-mask marker: renders its body
      NodePtr body = block({"endgeneration"}, end);
      return body;
    }
    syntax(what_, piece.line, "{% " + (kw.empty() ? piece.text : kw) + " %} is not supported");
  }

  std::vector<Piece> pieces_;
  size_t p_ = 0;
  int depth_ = 0;
  const Piece* last_ = nullptr;
  const std::string& what_;
};

// ---- rendering --------------------------------------------------------------------------------------------

const char* kind_name(const Value& v) {
  static const char* const names[] = {"undefined", "NoneType", "bool", "int", "float", "str", "list", "dict", "function"};
  return names[v.kind];
}

enum class Flow { Normal, Break, Continue };
using Frame = std::map<std::string, Value>;

class Renderer {
 public:
  Renderer(const std::string& what, const RenderOptions& options) : what_(what), options_(options) {}

  void run(const Node& root, const nlohmann::ordered_json& context) {
    auto top = std::make_shared<Frame>();
    if (!context.is_object()) fail(what_, ": the context is not a JSON object");
    for (const auto& [k, v] : context.items()) (*top)[k] = from_json(v);
    globals_ = globals();
    scopes_ = {globals_, top};
    root_ = top;
    exec(root);
  }
  std::string out;

 private:
  [[noreturn]] void error(int line, const std::string& msg) const { fail(what_, " line ", line, ": ", msg); }

  Value lookup(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (const auto f = (*it)->find(name); f != (*it)->end()) return f->second;
    return Value::undefined(name);
  }

  void require_defined(const Value& v, int line) const {
    if (v.kind == Value::Undefined) error(line, "'" + (v.name.empty() ? std::string("value") : v.name) + "' is undefined");
  }

  void step(int line) {
    if (++steps_ > options_.max_steps) error(line, "the template runs past " + std::to_string(options_.max_steps) + " steps");
  }

  void emit(const std::string& s, int line) {
    if (out_->size() + s.size() > options_.max_output_bytes)
      error(line, "the output passes " + std::to_string(options_.max_output_bytes) + " bytes");
    *out_ += s;
  }

  // ---- globals, methods, filters, tests ----

  // The globals transformers gives a template, the bottom frame of every scope chain (made once a render).
  std::shared_ptr<Frame> globals() {
    auto g = std::make_shared<Frame>();
    (*g)["range"] = Value::function("range", [this](Args a) {
      std::vector<int64_t> n;
      for (const Value& v : *a.positional) n.push_back(v.kind == Value::Int ? v.i : static_cast<int64_t>(v.as_double()));
      int64_t start = 0, stop = 0, stepn = 1;
      if (n.size() == 1) stop = n[0];
      else if (n.size() >= 2) start = n[0], stop = n[1], stepn = n.size() > 2 ? n[2] : 1;
      if (stepn == 0) fail(what_, ": range() step is 0");
      ValueList l;
      for (int64_t k = start; stepn > 0 ? k < stop : k > stop; k += stepn) {
        if (l.size() >= kMaxRange) fail(what_, ": range() longer than ", kMaxRange);
        l.push_back(Value::integer(k));
      }
      return Value::of_list(std::move(l));
    });
    for (const char* name : {"namespace", "dict"})
      (*g)[name] = Value::function(name, [is_namespace = std::string(name) == "namespace"](Args a) {
        auto d = std::make_shared<Dict>();
        d->is_namespace = is_namespace;
        for (const Value& v : *a.positional)
          if (v.kind == Value::Map)
            for (const auto& [k, x] : v.map->items) d->set(k, x);
        for (auto& [k, v] : *a.named) d->set(k, v);
        return of_map(d);
      });
    (*g)["raise_exception"] = Value::function("raise_exception", [this](Args a) -> Value {
      fail(what_, " raised: ", a.positional->empty() ? std::string("an exception") : str((*a.positional)[0]));
    });
    (*g)["strftime_now"] = Value::function("strftime_now", [this](Args a) {
      const std::string format = a.positional->empty() ? std::string("%Y-%m-%d") : str((*a.positional)[0]);
      if (options_.strftime_now) return Value::string(options_.strftime_now(format));
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[256];
      return Value::string(std::string(buf, std::strftime(buf, sizeof buf, format.c_str(), &tm)));
    });
    return g;
  }

  static std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  static std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
  }
  static std::string title(std::string s) {
    bool start = true;
    for (char& c : s) {
      const bool alpha = std::isalpha(static_cast<unsigned char>(c));
      c = static_cast<char>(alpha && start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      start = !alpha;
    }
    return s;
  }
  static Value split(const std::string& s, const Value& sep, int64_t maxsplit) {
    ValueList parts;
    if (sep.kind == Value::None || sep.kind == Value::Undefined) {  // runs of whitespace
      size_t p = 0;
      while (true) {
        while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
        if (p >= s.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
          std::string rest = s.substr(p);
          rest.erase(rest.find_last_not_of(" \t\r\n\f\v") + 1);
          parts.push_back(Value::string(rest));
          break;
        }
        size_t e = p;
        while (e < s.size() && !std::isspace(static_cast<unsigned char>(s[e]))) ++e;
        parts.push_back(Value::string(s.substr(p, e - p)));
        p = e;
      }
      return Value::of_list(std::move(parts));
    }
    if (sep.s.empty()) fail("split: empty separator");
    size_t p = 0;
    for (;;) {
      const size_t e = s.find(sep.s, p);
      if (e == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) {
        parts.push_back(Value::string(s.substr(p)));
        break;
      }
      parts.push_back(Value::string(s.substr(p, e - p)));
      p = e + sep.s.size();
    }
    return Value::of_list(std::move(parts));
  }
  // Argument `name`, given by name, or else the `index`-th given by position (kByNameOnly: by name only).
  static constexpr size_t kByNameOnly = SIZE_MAX;
  static Value arg(Args a, size_t index, const char* name, Value dflt = Value::undefined("")) {
    for (auto& [k, v] : *a.named)
      if (k == name) return v;
    return index < a.positional->size() ? (*a.positional)[index] : dflt;
  }
  static bool affix(const std::string& s, const Value& what, bool prefix) {
    const auto one = [&](const std::string& x) {
      return x.size() <= s.size() && (prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0);
    };
    if (what.kind == Value::List) return std::any_of(what.list->begin(), what.list->end(), [&](const Value& v) { return one(str(v)); });
    return one(str(what));
  }
  // (copied forward once: replacing in place moved the tail at each match, 9 s for a 1 MB string's million)
  static std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
    std::string out;
    size_t p = 0;
    if (from.empty()) {  // (Python: `to` before each character and after the last, `count` times at most)
      for (int64_t n = 0;; ++n) {
        if (count < 0 || n < count) check_size(out.size() + to.size()), out += to;
        if (p >= s.size()) return out;
        size_t end = p + 1;
        while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) ++end;  // (a whole character)
        check_size(out.size() + (end - p));
        out.append(s, p, end - p);
        p = end;
      }
    }
    for (int64_t n = 0; count < 0 || n < count; ++n) {
      const size_t at = s.find(from, p);
      if (at == std::string::npos) break;
      check_size(out.size() + (at - p) + to.size());
      out.append(s, p, at - p).append(to);
      p = at + from.size();
    }
    check_size(out.size() + (s.size() - p));
    return out.append(s, p, std::string::npos);
  }

  // obj.name: a dict's methods first, then its item (as jinja2's getattr); a string's methods; else undefined.
  Value attribute(const Value& obj, const std::string& name, int line) {
    require_defined(obj, line);
    if (obj.kind == Value::Map) {
      if (!obj.map->is_namespace) {
        if (name == "items" || name == "keys" || name == "values")
          return Value::function(name, [obj, name](Args) {
            ValueList l;
            for (const auto& [k, v] : obj.map->items)
              l.push_back(name == "keys" ? Value::string(k) : name == "values" ? v : Value::of_list({Value::string(k), v}));
            return Value::of_list(std::move(l));
          });
        if (name == "get")
          return Value::function(name, [obj](Args a) {
            const Value* v = obj.map->find(str(arg(a, 0, "key")));
            return v ? *v : arg(a, 1, "default", Value::none());
          });
      }
      if (const Value* v = obj.map->find(name)) return *v;
      return Value::undefined(name);
    }
    if (obj.kind == Value::String) {
      const std::string s = obj.s;
      static const char* const methods[] = {"strip",   "lstrip", "rstrip",     "split",   "startswith", "endswith",
                                            "replace", "upper",  "lower",      "title",   "capitalize", "find",
                                            "count",   "join",   "splitlines", "isdigit", "isspace"};
      if (std::find_if(std::begin(methods), std::end(methods), [&](const char* m) { return name == m; }) == std::end(methods))
        return Value::undefined(name);
      return Value::function(name, [s, name](Args a) -> Value {
        const Value a0 = arg(a, 0, "");
        const std::string ws = " \t\r\n\f\v";
        const std::string chars = a0.kind == Value::String ? a0.s : ws;
        if (name == "strip") return Value::string(strip_chars(s, chars, true, true));
        if (name == "lstrip") return Value::string(strip_chars(s, chars, true, false));
        if (name == "rstrip") return Value::string(strip_chars(s, chars, false, true));
        if (name == "split") {
          const Value m = arg(a, 1, "maxsplit", Value::integer(-1));
          return split(s, arg(a, 0, "sep", Value::none()), m.kind == Value::Int ? m.i : -1);
        }
        if (name == "startswith" || name == "endswith") return Value::boolean(affix(s, a0, name == "startswith"));
        if (name == "replace") {
          const Value c = arg(a, 2, "count", Value::integer(-1));
          return Value::string(replace_all(s, str(a0), str(arg(a, 1, "new")), c.kind == Value::Int ? c.i : -1));
        }
        if (name == "upper") return Value::string(upper(s));
        if (name == "lower") return Value::string(lower(s));
        if (name == "title") return Value::string(title(s));
        if (name == "capitalize") return Value::string(s.empty() ? s : upper(s.substr(0, 1)) + lower(s.substr(1)));
        if (name == "find") {
          const size_t p = s.find(str(a0));
          return Value::integer(p == std::string::npos ? -1 : static_cast<int64_t>(p));
        }
        if (name == "count") {
          const std::string x = str(a0);
          int64_t n = 0;
          for (size_t p = x.empty() ? std::string::npos : s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) ++n;
          return Value::integer(n);
        }
        if (name == "join") {
          std::string joined;
          if (a0.kind == Value::List)
            for (size_t k = 0; k < a0.list->size(); ++k) joined += (k ? s : "") + str((*a0.list)[k]);
          return Value::string(joined);
        }
        if (name == "splitlines") {
          ValueList l;
          size_t p = 0;
          while (p < s.size()) {
            size_t e = s.find('\n', p);
            if (e == std::string::npos) e = s.size();
            std::string piece = s.substr(p, e - p);
            if (!piece.empty() && piece.back() == '\r') piece.pop_back();
            l.push_back(Value::string(piece));
            p = e + 1;
          }
          return Value::of_list(std::move(l));
        }
        if (name == "isdigit")
          return Value::boolean(!s.empty() &&
                                std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }));
        return Value::boolean(!s.empty() &&
                              std::all_of(s.begin(), s.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }));
      });
    }
    return Value::undefined(name);
  }

  Value item(const Value& obj, const Value& key, int line) {
    require_defined(obj, line);
    if (obj.kind == Value::List || obj.kind == Value::String) {
      if (key.kind != Value::Int) {
        if (key.kind == Value::String) return attribute(obj, key.s, line);
        error(line, std::string(kind_name(obj)) + " indices must be integers, not " + kind_name(key));
      }
      const int64_t n = obj.kind == Value::List ? static_cast<int64_t>(obj.list->size()) : static_cast<int64_t>(obj.s.size());
      const int64_t k = key.i < 0 ? key.i + n : key.i;
      if (k < 0 || k >= n) return Value::undefined(repr(obj).substr(0, 40) + "[" + std::to_string(key.i) + "]");
      return obj.kind == Value::List ? (*obj.list)[static_cast<size_t>(k)] : Value::string(obj.s.substr(static_cast<size_t>(k), 1));
    }
    if (obj.kind == Value::Map) {
      if (const Value* v = obj.map->find(str(key))) return *v;
      return key.kind == Value::String ? attribute(obj, key.s, line) : Value::undefined(str(key));
    }
    return Value::undefined(str(key));
  }

  Value slice(const Value& obj, const Value& lo, const Value& hi, const Value& st, int line) {
    require_defined(obj, line);
    if (obj.kind != Value::List && obj.kind != Value::String) error(line, std::string("cannot slice a ") + kind_name(obj));
    const int64_t n = obj.kind == Value::List ? static_cast<int64_t>(obj.list->size()) : static_cast<int64_t>(obj.s.size());
    const int64_t step = st.kind == Value::Int ? st.i : 1;
    if (step == 0) error(line, "slice step cannot be zero");
    auto clamp = [&](const Value& v, int64_t dflt) {
      if (v.kind != Value::Int) return dflt;
      int64_t k = v.i < 0 ? v.i + n : v.i;
      return step > 0 ? std::clamp<int64_t>(k, 0, n) : std::clamp<int64_t>(k, -1, n - 1);
    };
    const int64_t b = clamp(lo, step > 0 ? 0 : n - 1), e = clamp(hi, step > 0 ? n : -1);
    ValueList l;
    std::string s;
    for (int64_t k = b; step > 0 ? k < e : k > e; k += step) {
      if (obj.kind == Value::List) l.push_back((*obj.list)[static_cast<size_t>(k)]);
      else s += obj.s[static_cast<size_t>(k)];
    }
    return obj.kind == Value::List ? Value::of_list(std::move(l)) : Value::string(std::move(s));
  }

  ValueList iterate(const Value& v, int line) {
    switch (v.kind) {
      case Value::Undefined:
      case Value::None: return {};
      case Value::List: return *v.list;
      case Value::Map: {
        ValueList keys;
        for (const auto& kv : v.map->items) keys.push_back(Value::string(kv.first));
        return keys;
      }
      case Value::String: {
        ValueList chars;
        for (size_t k = 0; k < v.s.size();) {  // one UTF-8 character each
          size_t len = 1;
          const auto c = static_cast<unsigned char>(v.s[k]);
          if (c >= 0xF0) len = 4;
          else if (c >= 0xE0) len = 3;
          else if (c >= 0xC0) len = 2;
          chars.push_back(Value::string(v.s.substr(k, len)));
          k += len;
        }
        return chars;
      }
      default: error(line, std::string("'") + kind_name(v) + "' object is not iterable");
    }
  }

  bool test(const std::string& name, const Value& v, const std::vector<Value>& args, int line) {
    const Value a0 = args.empty() ? Value::undefined("") : args[0];
    if (name == "defined") return v.kind != Value::Undefined;
    if (name == "undefined") return v.kind == Value::Undefined;
    if (name == "none") return v.kind == Value::None;
    if (name == "string") return v.kind == Value::String;
    if (name == "number") return v.kind == Value::Int || v.kind == Value::Float;
    if (name == "integer") return v.kind == Value::Int;
    if (name == "float") return v.kind == Value::Float;
    if (name == "boolean") return v.kind == Value::Bool;
    if (name == "true") return v.kind == Value::Bool && v.b;
    if (name == "false") return v.kind == Value::Bool && !v.b;
    if (name == "mapping") return v.kind == Value::Map;
    if (name == "iterable") return v.kind == Value::List || v.kind == Value::Map || v.kind == Value::String;
    if (name == "sequence") return v.kind == Value::List || v.kind == Value::Map || v.kind == Value::String;
    if (name == "callable") return v.kind == Value::Callable;
    if (name == "odd" || name == "even" || name == "divisibleby") {
      if (v.kind != Value::Int) error(line, "'" + name + "' tests an integer, not " + kind_name(v));
      if (name == "divisibleby") return a0.kind == Value::Int && a0.i != 0 && v.i % a0.i == 0;
      return (v.i % 2 != 0) == (name == "odd");
    }
    if (name == "eq" || name == "equalto" || name == "sameas") return equal(v, a0);
    if (name == "ne") return !equal(v, a0);
    if (name == "lt" || name == "gt" || name == "le" || name == "ge")
      return truthy(binary(name == "lt" ? "<" : name == "gt" ? ">" : name == "le" ? "<=" : ">=", v, a0, line));
    if (name == "in") return truthy(binary("in", v, a0, line));
    if (name == "lower") return v.kind == Value::String && lower(v.s) == v.s;
    if (name == "upper") return v.kind == Value::String && upper(v.s) == v.s;
    error(line, "the test '" + name + "' is not supported");
  }

  Value filter(const std::string& name, const Value& v, Args a, int line) {
    const Value a0 = arg(a, 0, "");
    if (name == "default" || name == "d") {
      const bool boolean = truthy(arg(a, 1, "boolean", Value::boolean(false)));
      const bool use_default = v.kind == Value::Undefined || (boolean && !truthy(v));
      return use_default ? (a0.kind == Value::Undefined ? Value::string("") : a0) : v;
    }
    if (name == "safe" || name == "string") return name == "safe" ? v : Value::string(str(v));
    require_defined(v, line);
    if (name == "trim" || name == "strip")
      return Value::string(strip_chars(str(v), a0.kind == Value::String ? a0.s : " \t\r\n\f\v", true, true));
    if (name == "tojson") {
      const Value indent = arg(a, 0, "indent", Value::none());
      std::string json;
      to_json(json, v, indent.kind == Value::Int ? static_cast<int>(indent.i) : -1, truthy(arg(a, kByNameOnly, "sort_keys")), 0);
      return Value::string(json);
    }
    if (name == "length" || name == "count") {
      if (v.kind == Value::String) {
        int64_t n = 0;
        for (unsigned char c : v.s) n += (c & 0xC0) != 0x80;
        return Value::integer(n);
      }
      if (v.kind == Value::List) return Value::integer(static_cast<int64_t>(v.list->size()));
      if (v.kind == Value::Map) return Value::integer(static_cast<int64_t>(v.map->items.size()));
      error(line, std::string("object of type '") + kind_name(v) + "' has no len()");
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      const std::string s = str(v);
      if (name == "capitalize") return Value::string(s.empty() ? s : upper(s.substr(0, 1)) + lower(s.substr(1)));
      return Value::string(name == "upper" ? upper(s) : name == "lower" ? lower(s) : title(s));
    }
    if (name == "replace") {
      const Value c = arg(a, 2, "count", Value::integer(-1));
      return Value::string(replace_all(str(v), str(a0), str(arg(a, 1, "new")), c.kind == Value::Int ? c.i : -1));
    }
    if (name == "int") {
      if (v.kind == Value::String) {
        int64_t n = 0;
        const std::string t = strip_chars(v.s, " \t\r\n", true, true);
        const auto r = std::from_chars(t.data(), t.data() + t.size(), n);
        return r.ec == std::errc() && r.ptr == t.data() + t.size() ? Value::integer(n) : (a0.kind == Value::Int ? a0 : Value::integer(0));
      }
      return v.numeric() ? Value::integer(static_cast<int64_t>(v.as_double())) : Value::integer(0);
    }
    if (name == "float")
      return v.numeric()               ? Value::number(v.as_double())
             : v.kind == Value::String ? Value::number(std::strtod(v.s.c_str(), nullptr))
                                       : Value::number(0);
    if (name == "abs") return v.kind == Value::Int ? Value::integer(v.i < 0 ? -v.i : v.i) : Value::number(std::fabs(v.as_double()));
    if (name == "round") {
      const double scale = std::pow(10.0, a0.kind == Value::Int ? static_cast<double>(a0.i) : 0.0);
      return Value::number(std::round(v.as_double() * scale) / scale);
    }
    if (name == "items") {
      if (v.kind != Value::Map) error(line, "items: not a dict");
      return attribute(v, "items", line).fn->operator()(a);
    }
    if (name == "e" || name == "escape") {
      std::string out;
      for (char c : str(v)) {
        switch (c) {
          case '&': out += "&amp;"; break;
          case '<': out += "&lt;"; break;
          case '>': out += "&gt;"; break;
          case '"': out += "&#34;"; break;
          case '\'': out += "&#39;"; break;
          default: out += c;
        }
      }
      return Value::string(out);
    }
    if (name == "indent") {
      const Value w = arg(a, 0, "width", Value::integer(4));
      const std::string pad = w.kind == Value::String ? w.s : std::string(static_cast<size_t>(std::clamp<int64_t>(w.i, 0, 1024)), ' ');
      const bool first = truthy(arg(a, 1, "first")), blank = truthy(arg(a, 2, "blank"));
      std::string s = str(v), out;
      size_t p = 0;
      bool line_start = first;
      for (bool at_first = true; p <= s.size(); at_first = false) {
        const size_t e = std::min(s.find('\n', p), s.size());
        const std::string ln = s.substr(p, e - p);
        if ((at_first ? line_start : true) && (blank || !ln.empty()) && !(at_first && !first)) out += pad;
        out += ln;
        check_size(out.size());
        if (e == s.size()) break;
        out += '\n';
        p = e + 1;
      }
      return Value::string(out);
    }
    // The filters over sequences.
    const ValueList items = iterate(v, line);
    if (name == "list") return Value::of_list(items);
    if (name == "first" || name == "last") {
      if (items.empty()) return Value::undefined(name);
      return name == "first" ? items.front() : items.back();
    }
    if (name == "reverse") {
      if (v.kind == Value::String) return Value::string(std::string(v.s.rbegin(), v.s.rend()));
      return Value::of_list(ValueList(items.rbegin(), items.rend()));
    }
    if (name == "join") {
      const Value attr = arg(a, 1, "attribute");
      std::string s;
      for (size_t k = 0; k < items.size(); ++k) {
        s += (k ? str(a0) : "") + str(attr.kind == Value::Undefined ? items[k] : attribute(items[k], str(attr), line));
        check_size(s.size());
      }
      return Value::string(s);
    }
    if (name == "unique") {
      ValueList u;
      for (const Value& x : items)
        if (std::none_of(u.begin(), u.end(), [&](const Value& y) { return equal(x, y); })) u.push_back(x);
      return Value::of_list(std::move(u));
    }
    if (name == "sum" || name == "min" || name == "max") {
      if (name == "sum") {
        Value total = arg(a, 1, "start", Value::integer(0));
        for (const Value& x : items) total = binary("+", total, x, line);
        return total;
      }
      if (items.empty()) return Value::undefined(name);
      Value best = items[0];
      for (const Value& x : items)
        if (truthy(binary(name == "min" ? "<" : ">", x, best, line))) best = x;
      return best;
    }
    if (name == "dictsort") {  // (key, value) pairs by key
      if (v.kind != Value::Map) error(line, "dictsort: not a dict");
      auto pairs = v.map->items;
      std::stable_sort(pairs.begin(), pairs.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      ValueList sorted;
      for (auto& [k, x] : pairs) sorted.push_back(Value::of_list({Value::string(k), x}));
      return Value::of_list(std::move(sorted));
    }
    if (name == "sort") {
      ValueList sorted = items;
      const bool reverse = truthy(arg(a, 0, "reverse"));
      const Value attr = arg(a, 2, "attribute");
      std::stable_sort(sorted.begin(), sorted.end(), [&](const Value& x, const Value& y) {
        const Value kx = attr.kind == Value::Undefined ? x : attribute(x, str(attr), line);
        const Value ky = attr.kind == Value::Undefined ? y : attribute(y, str(attr), line);
        return truthy(binary(reverse ? ">" : "<", kx, ky, line));
      });
      return Value::of_list(std::move(sorted));
    }
    if (name == "map") {
      ValueList mapped;
      const Value attr = arg(a, kByNameOnly, "attribute");
      for (const Value& x : items) {
        if (attr.kind != Value::Undefined) {
          Value y = attribute(x, str(attr), line);
          mapped.push_back(y.kind == Value::Undefined ? arg(a, kByNameOnly, "default") : y);
        } else {
          std::vector<Value> rest(a.positional->begin() + (a.positional->empty() ? 0 : 1), a.positional->end());
          std::vector<std::pair<std::string, Value>> none;
          mapped.push_back(filter(str(a0), x, Args{&rest, &none}, line));
        }
      }
      return Value::of_list(std::move(mapped));
    }
    if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
      const bool by_attr = name == "selectattr" || name == "rejectattr", keep = name == "selectattr" || name == "select";
      const size_t test_at = by_attr ? 1 : 0;
      const Value test_name = test_at < a.positional->size() ? (*a.positional)[test_at] : Value::undefined("");
      const std::vector<Value> test_args(a.positional->begin() + static_cast<long>(std::min(a.positional->size(), test_at + 1)),
                                         a.positional->end());
      ValueList kept;
      for (const Value& x : items) {
        const Value subject = by_attr ? attribute(x, str(a0), line) : x;
        const bool pass = test_name.kind == Value::Undefined ? truthy(subject) : test(str(test_name), subject, test_args, line);
        if (pass == keep) kept.push_back(x);
      }
      return Value::of_list(std::move(kept));
    }
    error(line, "the filter '" + name + "' is not supported");
  }

  Value binary(const std::string& op, const Value& l, const Value& r, int line) {
    if (op == "~") {
      std::string a = str(l), b = str(r);
      check_size(a.size() + b.size());
      return Value::string(a + b);
    }
    if (op == "in" || op == "not in") {
      require_defined(r, line);
      bool found = false;
      if (r.kind == Value::String) {
        if (l.kind != Value::String) error(line, std::string("'in <string>' requires a string on the left, not ") + kind_name(l));
        found = r.s.find(l.s) != std::string::npos;
      } else if (r.kind == Value::List) found = std::any_of(r.list->begin(), r.list->end(), [&](const Value& x) { return equal(l, x); });
      else if (r.kind == Value::Map) found = r.map->find(str(l)) != nullptr;
      else error(line, std::string("argument of type '") + kind_name(r) + "' is not iterable");
      return Value::boolean(found == (op == "in"));
    }
    if (op == "==") return Value::boolean(equal(l, r));
    if (op == "!=") return Value::boolean(!equal(l, r));
    require_defined(l, line);
    require_defined(r, line);
    const auto type_error = [&]() -> Value {
      error(line, "unsupported operand types for " + op + ": '" + kind_name(l) + "' and '" + kind_name(r) + "'");
    };
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c = 0;
      if (l.numeric() && r.numeric()) c = l.as_double() < r.as_double() ? -1 : l.as_double() > r.as_double() ? 1 : 0;
      else if (l.kind == Value::String && r.kind == Value::String) c = l.s.compare(r.s) < 0 ? -1 : l.s.compare(r.s) > 0 ? 1 : 0;
      else type_error();
      return Value::boolean(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    if (op == "+") {
      if (l.kind == Value::String && r.kind == Value::String) {
        check_size(l.s.size() + r.s.size());
        return Value::string(l.s + r.s);
      }
      if (l.kind == Value::List && r.kind == Value::List) {
        if (l.list->size() + r.list->size() > kMaxRange) error(line, "a list longer than " + std::to_string(kMaxRange));
        ValueList joined = *l.list;
        joined.insert(joined.end(), r.list->begin(), r.list->end());
        return Value::of_list(std::move(joined));
      }
    }
    if (op == "*" && ((l.kind == Value::String || l.kind == Value::List) && r.kind == Value::Int)) {
      if (r.i * static_cast<int64_t>(l.kind == Value::String ? l.s.size() : l.list->size()) >
          static_cast<int64_t>(options_.max_output_bytes))
        error(line, "a repetition passes the output limit");
      if (l.kind == Value::String) {
        std::string s;
        for (int64_t k = 0; k < r.i; ++k) s += l.s;
        return Value::string(s);
      }
      ValueList rep;
      for (int64_t k = 0; k < r.i; ++k) rep.insert(rep.end(), l.list->begin(), l.list->end());
      return Value::of_list(std::move(rep));
    }
    if (!l.numeric() || !r.numeric()) return type_error();
    const bool ints = l.kind != Value::Float && r.kind != Value::Float;
    const int64_t li = l.kind == Value::Bool ? l.b : l.i, ri = r.kind == Value::Bool ? r.b : r.i;
    const double lf = l.as_double(), rf = r.as_double();
    if (op == "+") return ints ? Value::integer(li + ri) : Value::number(lf + rf);
    if (op == "-") return ints ? Value::integer(li - ri) : Value::number(lf - rf);
    if (op == "*") return ints ? Value::integer(li * ri) : Value::number(lf * rf);
    if (op == "**") return ints && ri >= 0 ? Value::integer(static_cast<int64_t>(std::pow(lf, rf))) : Value::number(std::pow(lf, rf));
    if (rf == 0) error(line, "division by zero");
    if (op == "/") return Value::number(lf / rf);
    if (op == "//") return ints ? Value::integer(li / ri - ((li % ri != 0) && ((li < 0) != (ri < 0)))) : Value::number(std::floor(lf / rf));
    if (op == "%") {
      if (ints) {
        int64_t m = li % ri;
        if (m != 0 && ((m < 0) != (ri < 0))) m += ri;
        return Value::integer(m);
      }
      return Value::number(lf - rf * std::floor(lf / rf));
    }
    return type_error();
  }

  Value call(const Value& callee, const Expr& e, int line) {
    if (callee.kind != Value::Callable) {
      require_defined(callee, line);
      error(line, std::string("'") + kind_name(callee) + "' object is not callable");
    }
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> named;
    for (size_t k = 1; k < e.args.size(); ++k) positional.push_back(eval(*e.args[k]));
    for (const auto& [k, x] : e.kwargs) named.emplace_back(k, eval(*x));
    return (*callee.fn)(Args{&positional, &named});
  }

  Value eval(const Expr& e) {
    step(e.line);
    switch (e.kind) {
      case Expr::Literal: return e.value;
      case Expr::Name: return lookup(e.name);
      case Expr::Attr: return attribute(eval(*e.args[0]), e.name, e.line);
      case Expr::Item: return item(eval(*e.args[0]), eval(*e.args[1]), e.line);
      case Expr::Slice: {
        const auto opt = [&](const ExprPtr& x) { return x ? eval(*x) : Value::none(); };
        return slice(eval(*e.args[0]), opt(e.args[1]), opt(e.args[2]), opt(e.args[3]), e.line);
      }
      case Expr::Call: return call(eval(*e.args[0]), e, e.line);
      case Expr::Filter: {
        const Value v = eval(*e.args[0]);
        std::vector<Value> positional;
        std::vector<std::pair<std::string, Value>> named;
        for (size_t k = 1; k < e.args.size(); ++k) positional.push_back(eval(*e.args[k]));
        for (const auto& [k, x] : e.kwargs) named.emplace_back(k, eval(*x));
        return filter(e.name, v, Args{&positional, &named}, e.line);
      }
      case Expr::Test: {
        const Value v = eval(*e.args[0]);
        std::vector<Value> args;
        for (size_t k = 1; k < e.args.size(); ++k) args.push_back(eval(*e.args[k]));
        return Value::boolean(test(e.name, v, args, e.line) != e.negated);
      }
      case Expr::Neg: {
        const Value v = eval(*e.args[0]);
        if (v.kind == Value::Int) return Value::integer(-v.i);
        if (v.kind == Value::Float) return Value::number(-v.f);
        error(e.line, std::string("bad operand type for unary -: '") + kind_name(v) + "'");
      }
      case Expr::Not: return Value::boolean(!truthy(eval(*e.args[0])));
      case Expr::Binary: return binary(e.name, eval(*e.args[0]), eval(*e.args[1]), e.line);
      case Expr::And: {
        Value l = eval(*e.args[0]);
        return truthy(l) ? eval(*e.args[1]) : l;
      }
      case Expr::Or: {
        Value l = eval(*e.args[0]);
        return truthy(l) ? l : eval(*e.args[1]);
      }
      case Expr::Cond:
        if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
        return e.args.size() > 2 ? eval(*e.args[2]) : Value::undefined("");
      case Expr::ListLit: {
        ValueList l;
        for (const auto& x : e.args) l.push_back(eval(*x));
        return Value::of_list(std::move(l));
      }
      case Expr::DictLit: {
        auto d = std::make_shared<Dict>();
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) d->set(str(eval(*e.args[k])), eval(*e.args[k + 1]));
        return of_map(d);
      }
    }
    return Value::undefined("");
  }

  void assign(const std::string& name, const std::string& attr, Value v, int line) {
    if (attr.empty()) {
      (*scopes_.back())[name] = std::move(v);
      return;
    }
    const Value ns = lookup(name);
    if (ns.kind != Value::Map || !ns.map->is_namespace)
      error(line, "cannot assign attribute '" + attr + "' of '" + name + "': not a namespace()");
    ns.map->set(attr, std::move(v));
  }

  Flow exec_children(const Node& n) {
    for (const auto& c : n.children) {
      const Flow f = exec(*c);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec(const Node& n) {
    step(n.line);
    switch (n.kind) {
      case Node::Block: return exec_children(n);
      case Node::Text: emit(n.text, n.line); return Flow::Normal;
      case Node::Output: emit(str(eval(*n.exprs[0])), n.line); return Flow::Normal;
      case Node::If:
        for (size_t k = 0; k < n.children.size(); ++k)
          if (k >= n.exprs.size() || truthy(eval(*n.exprs[k]))) return exec(*n.children[k]);
        return Flow::Normal;
      case Node::For: {
        const ValueList all = iterate(eval(*n.exprs[0]), n.line);
        ValueList items;
        for (const Value& x : all) {
          if (n.exprs.size() > 1) {  // `for x in xs if cond`: the condition sees x
            scopes_.push_back(std::make_shared<Frame>());
            bind_targets(n, x);
            const bool keep = truthy(eval(*n.exprs[1]));
            scopes_.pop_back();
            if (!keep) continue;
          }
          items.push_back(x);
        }
        if (items.empty()) {
          if (n.children.size() > 1) return exec(*n.children[1]);
          return Flow::Normal;
        }
        const int64_t len = static_cast<int64_t>(items.size());
        for (int64_t k = 0; k < len; ++k) {
          auto frame = std::make_shared<Frame>();
          scopes_.push_back(frame);
          bind_targets(n, items[static_cast<size_t>(k)]);
          auto loop = std::make_shared<Dict>();
          loop->set("index", Value::integer(k + 1));
          loop->set("index0", Value::integer(k));
          loop->set("revindex", Value::integer(len - k));
          loop->set("revindex0", Value::integer(len - k - 1));
          loop->set("first", Value::boolean(k == 0));
          loop->set("last", Value::boolean(k == len - 1));
          loop->set("length", Value::integer(len));
          loop->set("depth", Value::integer(1));
          loop->set("depth0", Value::integer(0));
          loop->set("previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value::undefined("previtem"));
          loop->set("nextitem", k + 1 < len ? items[static_cast<size_t>(k + 1)] : Value::undefined("nextitem"));
          loop->set("cycle", Value::function("cycle", [k](Args a) {
                      return a.positional->empty() ? Value::none() : (*a.positional)[static_cast<size_t>(k) % a.positional->size()];
                    }));
          (*frame)["loop"] = of_map(loop);
          const Flow f = exec(*n.children[0]);
          scopes_.pop_back();
          if (f == Flow::Break) break;
        }
        return Flow::Normal;
      }
      case Node::Set: {
        Value v = eval(*n.exprs[0]);
        if (n.names.size() == 1) {
          assign(n.names[0], n.attr, std::move(v), n.line);
          return Flow::Normal;
        }
        const ValueList parts = iterate(v, n.line);
        if (parts.size() != n.names.size())
          error(n.line, "cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(n.names.size()) + " names");
        for (size_t k = 0; k < parts.size(); ++k) assign(n.names[k], "", parts[k], n.line);
        return Flow::Normal;
      }
      case Node::SetBlock: {
        std::string captured;
        std::string* saved = out_;
        out_ = &captured;
        exec(*n.children[0]);
        out_ = saved;
        assign(n.text, n.attr, Value::string(captured), n.line);
        return Flow::Normal;
      }
      case Node::Macro: {
        const Node* macro = &n;
        (*scopes_.back())[n.text] = Value::function(n.text, [this, macro](Args a) {
          if (++depth_ > kMaxDepth) fail(what_, " line ", macro->line, ": macros call each other deeper than ", kMaxDepth);
          auto frame = std::make_shared<Frame>();
          for (size_t k = 0; k < macro->names.size(); ++k) {
            Value v = k < a.positional->size() ? (*a.positional)[k]
                      : macro->exprs[k]        ? eval(*macro->exprs[k])
                                               : Value::undefined(macro->names[k]);
            for (auto& [name, x] : *a.named)
              if (name == macro->names[k]) v = x;
            (*frame)[macro->names[k]] = v;
          }
          std::vector<std::shared_ptr<Frame>> saved_scopes = {globals_, root_, frame};
          std::swap(saved_scopes, scopes_);
          std::string captured;
          std::string* saved_out = out_;
          out_ = &captured;
          exec(*macro->children[0]);
          out_ = saved_out;
          std::swap(saved_scopes, scopes_);
          --depth_;
          return Value::string(captured);
        });
        return Flow::Normal;
      }
      case Node::Break: return Flow::Break;
      case Node::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  void bind_targets(const Node& n, const Value& x) {
    if (n.names.size() == 1) {
      (*scopes_.back())[n.names[0]] = x;
      return;
    }
    const ValueList parts = iterate(x, n.line);
    if (parts.size() != n.names.size())
      error(n.line, "cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(n.names.size()) + " loop names");
    for (size_t k = 0; k < parts.size(); ++k) (*scopes_.back())[n.names[k]] = parts[k];
  }

  static constexpr size_t kMaxRange = 1'000'000;
  static constexpr int kMaxDepth = 64;
  const std::string& what_;
  const RenderOptions& options_;
  std::vector<std::shared_ptr<Frame>> scopes_;
  std::shared_ptr<Frame> globals_, root_;
  std::string* out_ = &out;
  int64_t steps_ = 0;
  int depth_ = 0;
};

}  // namespace

Template::Template(const std::string& source, std::string what) : what_(std::move(what)) {
  root_ = TemplateParser(split(source, what_), what_).parse();
}

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  Renderer r(what_, options);
  r.run(*root_, context);
  return std::move(r.out);
}

}  // namespace tern::llm::jinja
