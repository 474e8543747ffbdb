#include "passes/shape_values.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

namespace tern {

namespace {

// Where each symbol of the graph inputs' shapes can be read at run time: (value id, axis).
using SymbolSources = std::map<std::string, std::pair<int, int64_t>>;

SymbolSources symbol_sources(const Graph& g) {
  SymbolSources sources;
  for (int id : g.inputs) {
    const Value& v = g.values[static_cast<size_t>(id)];
    if (!v.shape) continue;
    for (size_t a = 0; a < v.shape->size(); ++a) {
      const Dim& d = (*v.shape)[a];
      if (!d.is_known() && !d.symbol.empty() && d.symbol != kInferredDim)
        sources.emplace(d.symbol, std::make_pair(id, static_cast<int64_t>(a)));
    }
  }
  return sources;
}

// One element as DimsOf computes it: a constant plus input dims.
struct Element {
  int64_t constant = 0;
  std::vector<std::pair<int, int64_t>> dims;  // (value id, axis)
};

std::optional<Element> resolve(const Dim& d, const SymbolSources& sources) {
  if (d.is_known()) return Element{d.value, {}};
  if (d.symbol == kInferredDim) return Element{-1, {}};
  if (d.symbol.empty()) return std::nullopt;
  if (auto it = sources.find(d.symbol); it != sources.end()) return Element{0, {it->second}};
  Element e;  // a sum no input names whole: its terms one by one
  const auto terms = symbol_terms(d.symbol);
  if (terms.size() < 2) return std::nullopt;
  for (const auto& t : terms) {
    auto it = sources.find(t);
    if (it == sources.end()) return std::nullopt;
    e.dims.push_back(it->second);
  }
  return e;
}

}  // namespace

int resolve_shape_values(Graph& g) {
  const SymbolSources sources = symbol_sources(g);
  int n = 0;
  for (Node& node : g.nodes) {
    if (node.outputs.size() != 1 || node.outputs[0] < 0 || (node.domain == "tern" && node.op_type == "DimsOf")) continue;
    const Value& v = g.values[static_cast<size_t>(node.outputs[0])];
    if (v.constant || !v.sym_value || !v.shape || !is_integer(v.dtype)) continue;
    const auto shape = concrete(*v.shape);
    if (!shape || numel_of(*shape) != static_cast<int64_t>(v.sym_value->size())) continue;
    std::vector<Element> elements;
    for (const Dim& d : *v.sym_value) {
      auto e = resolve(d, sources);
      if (!e) break;
      elements.push_back(std::move(*e));
    }
    if (elements.size() != v.sym_value->size()) continue;
    // Inputs: the graph inputs the elements read, each once.
    std::vector<int> inputs;
    std::vector<int64_t> constants, terms;
    for (size_t i = 0; i < elements.size(); ++i) {
      constants.push_back(elements[i].constant);
      for (auto [id, axis] : elements[i].dims) {
        auto at = std::find(inputs.begin(), inputs.end(), id);
        if (at == inputs.end()) at = inputs.insert(inputs.end(), id);
        terms.insert(terms.end(), {static_cast<int64_t>(i), at - inputs.begin(), axis});
      }
    }
    Node dims;
    dims.name = node.name + "/dims_of";
    dims.op_type = "DimsOf";
    dims.domain = "tern";
    dims.inputs = std::move(inputs);
    dims.outputs = node.outputs;
    auto ints = [](std::vector<int64_t> values) {
      Attribute a;
      a.kind = Attribute::Kind::Ints;
      a.ints = std::move(values);
      return a;
    };
    Attribute to;
    to.i = static_cast<int64_t>(v.dtype);
    dims.attrs["to"] = to;
    dims.attrs["shape"] = ints(*shape);
    dims.attrs["constants"] = ints(std::move(constants));
    dims.attrs["terms"] = ints(std::move(terms));
    node = std::move(dims);
    ++n;
  }
  link_producers(g);
  return n;
}

namespace {

// The attributes as bytes, or nullopt when one cannot be compared cheaply (a subgraph, a large tensor).
std::optional<std::string> attribute_key(const Node& node) {
  std::string key;
  auto add = [&key](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
  for (const auto& [name, a] : node.attrs) {
    if (!a.unsupported.empty()) return std::nullopt;
    key += name;
    key += '=';
    key += static_cast<char>(a.kind);
    switch (a.kind) {
      case Attribute::Kind::Int: add(&a.i, sizeof a.i); break;
      case Attribute::Kind::Float: add(&a.f, sizeof a.f); break;
      case Attribute::Kind::String: key += a.s; break;
      case Attribute::Kind::Ints: add(a.ints.data(), a.ints.size() * sizeof(int64_t)); break;
      case Attribute::Kind::Floats: add(a.floats.data(), a.floats.size() * sizeof(float)); break;
      case Attribute::Kind::Strings:
        for (const auto& s : a.strings) key += s + '\0';
        break;
      case Attribute::Kind::Tensor:
        if (!a.t.raw() || a.t.nbytes() > 256) return std::nullopt;
        key += static_cast<char>(a.t.dtype());
        key += static_cast<char>(a.t.rank());  // (the rank: an empty [0] and a scalar 0 have the same bytes otherwise)
        add(a.t.shape().data(), a.t.shape().size() * sizeof(int64_t));
        add(a.t.raw(), a.t.nbytes());
        break;
      default: return std::nullopt;
    }
    key += ';';
  }
  return key;
}

}  // namespace

int merge_duplicate_nodes(Graph& g, const std::function<bool(const Node&)>& deterministic) {
  std::vector<int> same_as(g.values.size());  // value id → the value that replaces it
  for (size_t v = 0; v < same_as.size(); ++v) same_as[v] = static_cast<int>(v);
  std::vector<char> is_output(g.values.size(), 0);
  for (int o : g.outputs) is_output[static_cast<size_t>(o)] = 1;
  // Small constants with the same contents are one value (each layer has its own axes, starts, -1…).
  std::unordered_map<std::string, int> constant_ids;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const auto& c = g.values[v].constant;
    if (!c || !c->raw() || c->nbytes() > 256 || is_output[v]) continue;
    // dtype, rank, dims, data: with the rank, an empty [0] tensor and a scalar 0 (the same bytes after the dtype
    // otherwise) stay apart — StableLM's Optimum export slices a shape past its end next to a scalar 0.
    std::string key{static_cast<char>(c->dtype()), static_cast<char>(c->rank())};
    key.append(reinterpret_cast<const char*>(c->shape().data()), c->shape().size() * sizeof(int64_t));
    key.append(static_cast<const char*>(c->raw()), c->nbytes());
    same_as[v] = constant_ids.emplace(std::move(key), static_cast<int>(v)).first->second;
  }
  std::unordered_map<std::string, size_t> first;  // key → the node that computes it first
  std::vector<char> merged(g.nodes.size(), 0);
  int n = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Node& node = g.nodes[k];
    for (int& in : node.inputs)
      if (in >= 0) in = same_as[static_cast<size_t>(in)];
    if (std::any_of(node.outputs.begin(), node.outputs.end(), [&](int o) { return o >= 0 && is_output[static_cast<size_t>(o)]; })) continue;
    auto attrs = attribute_key(node);
    if (!attrs || !deterministic(node)) continue;
    std::string key = node.domain + '\0' + node.op_type + '\0' + *attrs + '\0';
    key.append(reinterpret_cast<const char*>(node.inputs.data()), node.inputs.size() * sizeof(int));
    key += '\0';
    for (int o : node.outputs) key += o < 0 ? '-' : '+';  // which outputs are computed
    auto [it, fresh] = first.emplace(std::move(key), k);
    if (fresh) continue;
    const Node& kept = g.nodes[it->second];
    for (size_t i = 0; i < node.outputs.size(); ++i)
      if (node.outputs[i] >= 0) same_as[static_cast<size_t>(node.outputs[i])] = kept.outputs[i];
    merged[k] = 1;
    ++n;
  }
  if (n == 0) return 0;
  std::vector<Node> kept;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (!merged[k]) kept.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(kept);
  link_producers(g);
  return n;
}

}  // namespace tern
