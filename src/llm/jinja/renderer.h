// The renderer: walks a template's tree over a context, with the globals, methods, filters and tests
// transformers' jinja2 environment gives (those in builtins.cpp).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "llm/jinja.h"
#include "llm/jinja/syntax.h"

namespace tern::llm::jinja {

const char* kind_name(const Value& v);

enum class Flow { Normal, Break, Continue };
using Frame = std::map<std::string, Value>;

class Renderer {
 public:
  Renderer(const std::string& what, const RenderOptions& options) : what_(what), options_(options) {}

  void run(const Node& root, const nlohmann::ordered_json& context);
  std::string out;

 private:
  [[noreturn]] void error(int line, const std::string& msg) const { fail(what_, " line ", line, ": ", msg); }

  Value lookup(const std::string& name);
  void require_defined(const Value& v, int line) const;
  void step(int line);
  void emit(const std::string& s, int line);

  // ---- globals, methods, filters, tests ----

  // The globals transformers gives a template, the bottom frame of every scope chain (made once a render).
  std::shared_ptr<Frame> globals();
  static std::string lower(std::string s);
  static std::string upper(std::string s);
  static std::string title(std::string s);
  static Value split(const std::string& s, const Value& sep, int64_t maxsplit);
  // Argument `name`, given by name, or else the `index`-th given by position (kByNameOnly: by name only).
  static constexpr size_t kByNameOnly = SIZE_MAX;
  static Value arg(Args a, size_t index, const char* name, Value dflt = Value::undefined(""));
  static bool affix(const std::string& s, const Value& what, bool prefix);
  // (copied forward once: replacing in place moved the tail at each match, 9 s for a 1 MB string's million)
  static std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count);

  // obj.name: a dict's methods first, then its item (as jinja2's getattr); a string's methods; else undefined.
  Value attribute(const Value& obj, const std::string& name, int line);
  Value item(const Value& obj, const Value& key, int line);
  Value slice(const Value& obj, const Value& lo, const Value& hi, const Value& st, int line);
  ValueList iterate(const Value& v, int line);
  bool test(const std::string& name, const Value& v, const std::vector<Value>& args, int line);
  Value filter(const std::string& name, const Value& v, Args a, int line);
  Value binary(const std::string& op, const Value& l, const Value& r, int line);
  Value call(const Value& callee, const Expr& e, int line);
  Value eval(const Expr& e);
  void assign(const std::string& name, const std::string& attr, Value v, int line);
  Flow exec_children(const Node& n);
  Flow exec(const Node& n);
  void bind_targets(const Node& n, const Value& x);
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

}  // namespace tern::llm::jinja
