#include "llm/jinja/renderer.h"

#include <algorithm>
#include <cmath>
#include <ctime>

namespace tern::llm::jinja {

const char* kind_name(const Value& v) {
  static const char* const names[] = {"undefined", "NoneType", "bool", "int", "float", "str", "list", "dict", "function"};
  return names[v.kind];
}

void Renderer::run(const Node& root, const nlohmann::ordered_json& context) {
  auto top = std::make_shared<Frame>();
  if (!context.is_object()) fail(what_, ": the context is not a JSON object");
  for (const auto& [k, v] : context.items()) (*top)[k] = from_json(v);
  globals_ = globals();
  scopes_ = {globals_, top};
  root_ = top;
  exec(root);
}

Value Renderer::lookup(const std::string& name) {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
    if (const auto f = (*it)->find(name); f != (*it)->end()) return f->second;
  return Value::undefined(name);
}

void Renderer::require_defined(const Value& v, int line) const {
  if (v.kind == Value::Undefined) error(line, "'" + (v.name.empty() ? std::string("value") : v.name) + "' is undefined");
}

void Renderer::step(int line) {
  if (++steps_ > options_.max_steps) error(line, "the template runs past " + std::to_string(options_.max_steps) + " steps");
}

void Renderer::emit(const std::string& s, int line) {
  if (out_->size() + s.size() > options_.max_output_bytes)
    error(line, "the output passes " + std::to_string(options_.max_output_bytes) + " bytes");
  *out_ += s;
}

// The globals transformers gives a template, the bottom frame of every scope chain (made once a render).
std::shared_ptr<Frame> Renderer::globals() {
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

Value Renderer::item(const Value& obj, const Value& key, int line) {
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

Value Renderer::slice(const Value& obj, const Value& lo, const Value& hi, const Value& st, int line) {
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

ValueList Renderer::iterate(const Value& v, int line) {
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

Value Renderer::binary(const std::string& op, const Value& l, const Value& r, int line) {
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
    if (r.i * static_cast<int64_t>(l.kind == Value::String ? l.s.size() : l.list->size()) > static_cast<int64_t>(options_.max_output_bytes))
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

Value Renderer::call(const Value& callee, const Expr& e, int line) {
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

Value Renderer::eval(const Expr& e) {
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

void Renderer::assign(const std::string& name, const std::string& attr, Value v, int line) {
  if (attr.empty()) {
    (*scopes_.back())[name] = std::move(v);
    return;
  }
  const Value ns = lookup(name);
  if (ns.kind != Value::Map || !ns.map->is_namespace)
    error(line, "cannot assign attribute '" + attr + "' of '" + name + "': not a namespace()");
  ns.map->set(attr, std::move(v));
}

Flow Renderer::exec_children(const Node& n) {
  for (const auto& c : n.children) {
    const Flow f = exec(*c);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Flow Renderer::exec(const Node& n) {
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

void Renderer::bind_targets(const Node& n, const Value& x) {
  if (n.names.size() == 1) {
    (*scopes_.back())[n.names[0]] = x;
    return;
  }
  const ValueList parts = iterate(x, n.line);
  if (parts.size() != n.names.size())
    error(n.line, "cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(n.names.size()) + " loop names");
  for (size_t k = 0; k < parts.size(); ++k) (*scopes_.back())[n.names[k]] = parts[k];
}

Template::Template(const std::string& source, std::string what) : what_(std::move(what)) { root_ = parse_template(source, what_); }

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  Renderer r(what_, options);
  r.run(*root_, context);
  return std::move(r.out);
}

}  // namespace tern::llm::jinja
