#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "llm/jinja/renderer.h"

namespace tern::llm::jinja {

std::string Renderer::lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Renderer::upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string Renderer::title(std::string s) {
  bool start = true;
  for (char& c : s) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    c = static_cast<char>(alpha && start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
    start = !alpha;
  }
  return s;
}

Value Renderer::split(const std::string& s, const Value& sep, int64_t maxsplit) {
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

Value Renderer::arg(Args a, size_t index, const char* name, Value dflt) {
  for (auto& [k, v] : *a.named)
    if (k == name) return v;
  return index < a.positional->size() ? (*a.positional)[index] : dflt;
}

bool Renderer::affix(const std::string& s, const Value& what, bool prefix) {
  const auto one = [&](const std::string& x) {
    return x.size() <= s.size() && (prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0);
  };
  if (what.kind == Value::List) return std::any_of(what.list->begin(), what.list->end(), [&](const Value& v) { return one(str(v)); });
  return one(str(what));
}

// (copied forward once: replacing in place moved the tail at each match, 9 s for a 1 MB string's million)
std::string Renderer::replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
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
Value Renderer::attribute(const Value& obj, const std::string& name, int line) {
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

bool Renderer::test(const std::string& name, const Value& v, const std::vector<Value>& args, int line) {
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

Value Renderer::filter(const std::string& name, const Value& v, Args a, int line) {
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

}  // namespace tern::llm::jinja
