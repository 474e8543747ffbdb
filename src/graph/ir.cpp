#include "graph/ir.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <sstream>

#include "core/checked_math.h"

namespace tern {

SymShape sym_shape(const Shape& s) {
  SymShape r;
  r.reserve(s.size());
  for (int64_t d : s) r.push_back(Dim::known(d));
  return r;
}

namespace {
// A symbol made by dim arithmetic, unknown past kMaxSymbol characters: a graph that adds or multiplies a shape by
// itself again and again (a hostile file: 60 such Adds would make a 2^60-character name) gets unknown dims instead.
constexpr size_t kMaxSymbol = 256;
Dim bounded(std::string symbol) { return symbol.size() > kMaxSymbol ? Dim{} : Dim::named(std::move(symbol)); }

}  // namespace

Dim dim_sum(const Dim& a, const Dim& b) {
  if (a.is_known() && b.is_known()) return Dim::known(checked_add(a.value, b.value, "a sum of dims"));
  if (a.is_known() && a.value == 0) return b;
  if (b.is_known() && b.value == 0) return a;
  const bool named = !a.is_known() && !b.is_known() && !a.symbol.empty() && !b.symbol.empty();
  if (!named || a.symbol == kInferredDim || b.symbol == kInferredDim) return Dim{};
  return bounded(a.symbol + " + " + b.symbol);
}

namespace {
// Splits `s` at `sep` where it is not inside parentheses.
std::vector<std::string> split_outside_parens(const std::string& s, const std::string& sep) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t at = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    else if (s[i] == ')') --depth;
    else if (depth == 0 && s.compare(i, sep.size(), sep) == 0) {
      parts.push_back(s.substr(at, i - at));
      at = i + sep.size();
      i = at - 1;
    }
  }
  parts.push_back(s.substr(at));
  return parts;
}

Dim dim_of(const DimProduct& m) {
  if (m.factors.empty()) return Dim::known(m.coefficient);
  if (m.coefficient == 0) return Dim::known(0);
  if (m.coefficient == 1 && m.factors.size() == 1) {  // a plain symbol, or a sum out of its parentheses
    const std::string& f = m.factors[0];
    return bounded(factor_terms(f).size() > 1 ? f.substr(1, f.size() - 2) : f);
  }
  std::string s = m.coefficient == 1 ? "" : std::to_string(m.coefficient);
  for (const std::string& f : m.factors) s += (s.empty() ? "" : "*") + f;
  return bounded(std::move(s));
}
}  // namespace

std::optional<DimProduct> dim_as_product(const Dim& d) {
  if (d.is_known()) return DimProduct{d.value, {}};
  if (d.symbol.empty() || d.symbol == kInferredDim) return std::nullopt;
  DimProduct m;
  if (split_outside_parens(d.symbol, " + ").size() > 1) {
    m.factors.push_back("(" + d.symbol + ")");
    return m;
  }
  for (const std::string& f : split_outside_parens(d.symbol, "*")) {
    if (!f.empty() && f.find_first_not_of("0123456789") == std::string::npos && f.size() < 19) {
      if (__builtin_mul_overflow(m.coefficient, std::stoll(f), &m.coefficient)) return std::nullopt;
    } else {
      m.factors.push_back(f);
    }
  }
  std::sort(m.factors.begin(), m.factors.end());
  return m;
}

std::vector<std::string> symbol_terms(const std::string& symbol) { return split_outside_parens(symbol, " + "); }

std::vector<std::string> factor_terms(const std::string& factor) {
  if (factor.size() > 2 && factor.front() == '(' && factor.back() == ')') {
    auto terms = split_outside_parens(factor.substr(1, factor.size() - 2), " + ");
    if (terms.size() > 1) return terms;
  }
  return {factor};
}

Dim dim_product(const Dim& a, const Dim& b) {
  if (a.is_known() && b.is_known()) return Dim::known(checked_mul(a.value, b.value, "a product of dims"));
  if ((a.is_known() && a.value == 0) || (b.is_known() && b.value == 0)) return Dim::known(0);
  auto x = dim_as_product(a), y = dim_as_product(b);
  if (!x || !y || __builtin_mul_overflow(x->coefficient, y->coefficient, &x->coefficient)) return Dim{};
  x->factors.insert(x->factors.end(), y->factors.begin(), y->factors.end());
  std::sort(x->factors.begin(), x->factors.end());
  return dim_of(*x);
}

Dim dim_quotient(const Dim& a, const Dim& b) {
  auto x = dim_as_product(a), y = dim_as_product(b);
  if (!x || !y || y->coefficient <= 0 || x->coefficient % y->coefficient != 0) return Dim{};
  x->coefficient /= y->coefficient;
  for (const std::string& f : y->factors) {
    auto it = std::find(x->factors.begin(), x->factors.end(), f);
    if (it == x->factors.end()) return Dim{};
    x->factors.erase(it);
  }
  return dim_of(*x);
}

Dim dim_difference(const Dim& a, const Dim& b) {
  if (a.is_known() && b.is_known()) return Dim::known(checked_sub(a.value, b.value, "a difference of dims"));
  if (b.is_known() && b.value == 0) return a;
  if (a.is_known() || a.symbol.empty() || b.symbol.empty() || a.symbol == kInferredDim || b.symbol == kInferredDim) return Dim{};
  std::vector<std::string> rest = symbol_terms(a.symbol);
  for (const std::string& t : symbol_terms(b.symbol)) {
    auto it = std::find(rest.begin(), rest.end(), t);
    if (it == rest.end()) return Dim{};
    rest.erase(it);
  }
  if (rest.empty()) return Dim::known(0);
  std::string symbol = rest[0];
  for (size_t i = 1; i < rest.size(); ++i) symbol += " + " + rest[i];
  return bounded(std::move(symbol));
}

std::optional<Shape> concrete(const SymShape& s) {
  Shape r;
  r.reserve(s.size());
  for (const Dim& d : s) {
    if (!d.is_known()) return std::nullopt;
    r.push_back(d.value);
  }
  return r;
}

std::string sym_shape_str(const SymShape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ',';
    r += s[i].str();
  }
  return r + "]";
}

const Attribute* Node::attr(const std::string& k) const {
  auto it = attrs.find(k);
  if (it == attrs.end()) return nullptr;
  if (!it->second.unsupported.empty()) fail_unsupported(describe(), ": ", it->second.unsupported);
  return &it->second;
}

namespace {
const char* kind_name(Attribute::Kind k) {
  switch (k) {
    case Attribute::Kind::Float: return "a float";
    case Attribute::Kind::Int: return "an int";
    case Attribute::Kind::String: return "a string";
    case Attribute::Kind::Tensor: return "a tensor";
    case Attribute::Kind::Graph: return "a graph";
    case Attribute::Kind::Floats: return "floats";
    case Attribute::Kind::Ints: return "ints";
    case Attribute::Kind::Strings: return "strings";
    case Attribute::Kind::Tensors: return "tensors";
    case Attribute::Kind::Graphs: return "graphs";
    case Attribute::Kind::TypeProto: return "a type";
  }
  return "?";
}
}  // namespace

// An attribute of the kind the op reads, or null when absent; one of another kind fails naming both (a
// string where an int belongs is a broken file, not a default).
const Attribute* Node::attr(const std::string& k, Attribute::Kind kind) const {
  const Attribute* a = attr(k);
  if (a && a->kind != kind) fail(describe(), ": attribute '", k, "' is ", kind_name(a->kind), ", ", kind_name(kind), " was expected");
  return a;
}

int64_t Node::attr_int(const std::string& k, int64_t dflt) const {
  const Attribute* a = attr(k, Attribute::Kind::Int);
  return a ? a->i : dflt;
}

float Node::attr_float(const std::string& k, float dflt) const {
  const Attribute* a = attr(k, Attribute::Kind::Float);
  return a ? a->f : dflt;
}

std::string Node::attr_string(const std::string& k, const std::string& dflt) const {
  const Attribute* a = attr(k, Attribute::Kind::String);
  return a ? a->s : dflt;
}

std::vector<int64_t> Node::attr_ints(const std::string& k, std::vector<int64_t> dflt) const {
  const Attribute* a = attr(k, Attribute::Kind::Ints);
  return a ? a->ints : dflt;
}

std::vector<float> Node::attr_floats(const std::string& k, std::vector<float> dflt) const {
  const Attribute* a = attr(k, Attribute::Kind::Floats);
  return a ? a->floats : dflt;
}

std::string Node::describe() const {
  std::ostringstream os;
  os << op_type << " node '" << name << "'";
  if (!domain.empty()) os << " (domain " << domain << ")";
  return os.str();
}

int Graph::find_value(const std::string& n) const {
  auto it = value_ids.find(n);
  return it == value_ids.end() ? -1 : it->second;
}

int Graph::add_value(const std::string& n) {
  auto it = value_ids.find(n);
  if (it != value_ids.end()) return it->second;
  int id = static_cast<int>(values.size());
  Value v;
  v.name = n;
  values.push_back(std::move(v));
  value_ids.emplace(n, id);
  return id;
}

int Graph::add_constant(const std::string& name, Tensor t) {
  const int id = add_value(name);
  Value& v = values[static_cast<size_t>(id)];
  v.dtype = t.dtype();
  v.shape = sym_shape(t.shape());
  v.constant = std::move(t);
  return id;
}

int Graph::add_concatenation(const std::string& name, ConstantParts parts) {
  const DType dtype = parts.tensors.at(0).dtype();
  const Shape shape = parts.shape;
  const int id = add_constant(name, Tensor(dtype, shape, nullptr));
  values[static_cast<size_t>(id)].parts = std::make_shared<const ConstantParts>(std::move(parts));
  return id;
}

int64_t ConstantParts::extent(const Tensor& part) const {
  int64_t across = 1;  // the whole's elements per unit along the axis
  for (size_t d = 0; d < shape.size(); ++d)
    if (static_cast<int64_t>(d) != axis) across *= shape[d];
  return across > 0 ? part.numel() / across : 0;
}

Tensor ConstantParts::whole() const {
  Tensor out(tensors.at(0).dtype(), shape);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  const size_t slice = out.nbytes() / static_cast<size_t>(std::max<int64_t>(outer, 1));
  size_t at = 0;  // this part's offset in each outer slice
  for (const Tensor& t : tensors) {
    const size_t share = t.nbytes() / static_cast<size_t>(std::max<int64_t>(outer, 1));
    if (t.dtype() != out.dtype() || !t.raw() || at + share > slice)
      fail("a concatenation's parts do not make its shape ", shape_str(shape));
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(static_cast<char*>(out.raw()) + static_cast<size_t>(o) * slice + at,
                  static_cast<const char*>(t.raw()) + static_cast<size_t>(o) * share, share);
    if (t.buffer()) t.buffer()->drop_pages(t.raw(), t.nbytes());
    at += share;
  }
  return out;
}

bool has_subgraph(const Node& n) {
  for (const auto& [name, a] : n.attrs)
    if (a.kind == Attribute::Kind::Graph || a.kind == Attribute::Kind::Graphs) return true;
  return false;
}

std::vector<std::string> outer_values_read(const Node& n) {
  std::vector<std::string> names;
  auto free_values = [&](const Graph& sub) {
    for (size_t id = 0; id < sub.values.size(); ++id) {
      const Value& v = sub.values[id];
      if (v.producer < 0 && !v.constant && std::find(sub.inputs.begin(), sub.inputs.end(), static_cast<int>(id)) == sub.inputs.end())
        names.push_back(v.name);
    }
  };
  for (const auto& [name, a] : n.attrs) {
    if (a.kind == Attribute::Kind::Graph && a.g) free_values(*a.g);
    if (a.kind == Attribute::Kind::Graphs)
      for (const auto& sub : a.graphs)
        if (sub) free_values(*sub);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

void link_producers(Graph& g) {
  for (Value& v : g.values) v.producer = -1;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int o : g.nodes[n].outputs)
      if (o >= 0) g.values[static_cast<size_t>(o)].producer = static_cast<int>(n);
}

void topological_sort(Graph& g) {
  link_producers(g);
  const size_t n = g.nodes.size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> consumers(n);
  for (size_t i = 0; i < n; ++i) {
    for (int in : g.nodes[i].inputs) {
      if (in < 0) continue;
      const Value& v = g.values[static_cast<size_t>(in)];
      if (v.producer >= 0) {
        ++pending[i];
        consumers[static_cast<size_t>(v.producer)].push_back(static_cast<int>(i));
      }
    }
  }
  std::vector<int> order;
  order.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) order.push_back(static_cast<int>(i));
  for (size_t k = 0; k < order.size(); ++k)
    for (int c : consumers[static_cast<size_t>(order[k])])
      if (--pending[static_cast<size_t>(c)] == 0) order.push_back(c);
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (pending[i] > 0) fail("graph '", g.name, "' has a cycle through ", g.nodes[i].describe());
  }
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (int i : order) sorted.push_back(std::move(g.nodes[static_cast<size_t>(i)]));
  g.nodes = std::move(sorted);
  link_producers(g);
}

}  // namespace tern
