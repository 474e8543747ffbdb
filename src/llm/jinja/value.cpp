#include "llm/jinja/value.h"

#include <charconv>
#include <cmath>

namespace tern::llm::jinja {

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

}  // namespace tern::llm::jinja
