// Read-only pattern-matching queries over a Graph, shared by the fusion passes.
#pragma once
#include <algorithm>
#include <optional>
#include <vector>

#include "graph/ir.h"

namespace tern {

// Read-only questions about a graph whose producers are linked.
class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), consumers_(g.values.size()) {
    for (size_t k = 0; k < g.nodes.size(); ++k)
      for (int in : g.nodes[k].inputs)
        if (in >= 0) consumers_[static_cast<size_t>(in)].push_back(static_cast<int>(k));
  }
  const Graph& graph() const { return g_; }
  const std::vector<int>& consumers(int id) const { return consumers_[static_cast<size_t>(id)]; }
  // Read by exactly one node and not a graph output: a value a rewrite may make disappear.
  bool single_use(int id) const { return id >= 0 && consumers(id).size() == 1 && !is_output(id); }
  int producer_index(int id) const { return id >= 0 ? g_.values[static_cast<size_t>(id)].producer : -1; }
  const Node* producer(int id) const {
    const int p = producer_index(id);
    return p >= 0 ? &g_.nodes[static_cast<size_t>(p)] : nullptr;
  }
  // The producer of `id` when it is `op_type` of `domain`.
  const Node* op(int id, const char* op_type, const char* domain = "") const {
    const Node* n = producer(id);
    return n && n->op_type == op_type && n->domain == domain ? n : nullptr;
  }
  int index_of(const Node* n) const { return n ? static_cast<int>(n - g_.nodes.data()) : -1; }
  bool is_input(int id) const { return std::count(g_.inputs.begin(), g_.inputs.end(), id) > 0; }
  bool is_output(int id) const { return std::count(g_.outputs.begin(), g_.outputs.end(), id) > 0; }
  const Value& value(int id) const { return g_.values[static_cast<size_t>(id)]; }
  // Dim i (negative: from the end) when the value's rank and that dim are known, else -1.
  int64_t dim(int id, int64_t i) const {
    if (id < 0) return -1;  // (first: value(-1) would read before the values)
    const auto& s = value(id).shape;
    if (!s) return -1;
    const int64_t r = static_cast<int64_t>(s->size());
    if (i < 0) i += r;
    return i >= 0 && i < r ? (*s)[static_cast<size_t>(i)].value : -1;
  }
  int64_t rank(int id) const { return id >= 0 && value(id).shape ? static_cast<int64_t>(value(id).shape->size()) : -1; }
  // A constant's single element.
  std::optional<double> scalar(int id) const {
    if (id < 0 || !value(id).constant || value(id).constant->numel() != 1) return std::nullopt;
    return value(id).constant->at_f64(0);
  }
  // The elements of a constant integer tensor; nullopt if it is not one.
  std::optional<std::vector<int64_t>> ints(int id) const {
    if (id < 0 || !value(id).constant || !is_integer(value(id).constant->dtype())) return std::nullopt;
    std::vector<int64_t> v;
    for (int64_t i = 0; i < value(id).constant->numel(); ++i) v.push_back(value(id).constant->at_i64(i));
    return v;
  }
  // True when every graph input `id` depends on is in `allowed` (constants are always allowed). With
  // `any_shape`, what is read only through Shape nodes does not count (lengths, not data).
  bool depends_only_on(int id, const std::vector<int>& allowed, bool any_shape = false) const {
    std::vector<char> seen(g_.values.size(), 0);
    std::vector<int> stack{id};
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      if (v < 0 || seen[static_cast<size_t>(v)]) continue;
      seen[static_cast<size_t>(v)] = 1;
      if (value(v).constant) continue;
      const Node* p = producer(v);
      if (!p) {
        if (std::count(allowed.begin(), allowed.end(), v) == 0) return false;
        continue;
      }
      if (any_shape && p->op_type == "Shape" && p->domain.empty()) continue;
      stack.insert(stack.end(), p->inputs.begin(), p->inputs.end());
    }
    return true;
  }

 private:
  const Graph& g_;
  std::vector<std::vector<int>> consumers_;
};

inline int input_of(const Node& n, int i) { return i < static_cast<int>(n.inputs.size()) ? n.inputs[static_cast<size_t>(i)] : -1; }

}  // namespace tern
