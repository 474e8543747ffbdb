// The interpreter's values: Python's (None, bool, int, float, str, list, dict, a callable) as a template sees
// them, made from the JSON context, printed as Python prints them (str, repr, tojson).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace tern::llm::jinja {

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

inline Value of_map(std::shared_ptr<Dict> d) {
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
void check_size(size_t bytes);

// Python's repr of a float: the shortest text that reads back, with ".0" on a whole number.
std::string float_text(double v);

// json.dumps(..., ensure_ascii=False) of a string: quotes, backslash, control characters escaped.
void json_string(std::string& out, const std::string& s);

// json.dumps: separators (", ", ": ") flat, ("," and newlines, ": ") with an indent; keys sorted on request.
void to_json(std::string& out, const Value& v, int indent, bool sort_keys, int depth);

// str(v), as Jinja prints a value: Python's str (None, True, 1.0, ['a', 1], {'k': 'v'}); undefined prints nothing.
std::string str(const Value& v);

std::string repr(const Value& v);

bool truthy(const Value& v);

bool equal(const Value& a, const Value& b);

// `s` without the leading (left) and trailing (right) bytes that are among `chars`.
std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right);
inline constexpr const char* kSpace = " \t\r\n";

}  // namespace tern::llm::jinja
