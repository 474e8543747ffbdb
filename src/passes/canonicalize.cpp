#include "passes/canonicalize.h"

#include <algorithm>

#include "passes/matcher.h"

namespace tern {
namespace {

// Every reader of `from` reads `to` instead, unless `from` is a graph output (then nothing changes and
// false is returned: the node that makes it stays).
bool redirect(Graph& g, int from, int to) {
  if (std::count(g.outputs.begin(), g.outputs.end(), from)) return false;
  for (Node& n : g.nodes)
    for (int& in : n.inputs)
      if (in == from) in = to;
  return true;
}

bool is_default(const Node& n, const char* op) { return n.op_type == op && n.domain.empty(); }

// B holds every value of A: the widening a round trip through B undoes exactly.
bool holds_exactly(DType a, DType b) {
  switch (a) {
    case DType::Float16:
    case DType::BFloat16: return b == DType::Float32 || b == DType::Float64;
    case DType::Float32: return b == DType::Float64;
    case DType::Int8: return b == DType::Int16 || b == DType::Int32 || b == DType::Int64;
    case DType::Int16: return b == DType::Int32 || b == DType::Int64;
    case DType::Int32: return b == DType::Int64;
    case DType::UInt8: return b == DType::UInt16 || b == DType::Int16 || b == DType::UInt32 || b == DType::Int32 || b == DType::Int64;
    default: return false;
  }
}

}  // namespace

int remove_no_op_nodes(Graph& g) {
  link_producers(g);
  int n = 0;
  for (Node& node : g.nodes) {
    if (node.inputs.empty() || node.inputs[0] < 0 || node.outputs.empty() || node.outputs[0] < 0) continue;
    const int x = node.inputs[0], y = node.outputs[0];
    bool no_op = is_default(node, "Identity") || (is_default(node, "Concat") && node.inputs.size() == 1);
    if (is_default(node, "Dropout"))  // inference: y = x; the mask output, when there, must be unread
      no_op = (node.outputs.size() < 2 || node.outputs[1] < 0) && (node.inputs.size() < 3 || node.inputs[2] < 0);
    if (is_default(node, "Cast"))
      no_op = g.values[static_cast<size_t>(x)].dtype != DType::Undefined &&
              g.values[static_cast<size_t>(x)].dtype == static_cast<DType>(node.attr_int("to", 0));
    if (is_default(node, "Reshape")) {  // to the shape it has (the dynamo export of transformers 5's GPT-NeoX attention)
      const auto &from = g.values[static_cast<size_t>(x)].shape, &to = g.values[static_cast<size_t>(y)].shape;
      no_op = from && to && *from == *to;
    }
    if (no_op && redirect(g, y, x)) ++n;
  }
  return n;
}

int remove_round_trip_casts(Graph& g) {
  link_producers(g);
  const Matcher m(g);
  std::vector<std::pair<int, int>> pairs;  // (second cast's output, first cast's input)
  for (const Node& back : g.nodes) {
    if (!is_default(back, "Cast")) continue;
    const Node* there = m.op(back.inputs[0], "Cast");
    if (!there) continue;
    const DType a = m.value(there->inputs[0]).dtype, b = m.value(back.inputs[0]).dtype;
    if (a != DType::Undefined && static_cast<DType>(back.attr_int("to", 0)) == a && holds_exactly(a, b))
      pairs.emplace_back(back.outputs[0], there->inputs[0]);
  }
  int n = 0;
  for (auto [from, to] : pairs) n += redirect(g, from, to);
  return n;
}

int matmul_transposed_weights(Graph& g) {
  link_producers(g);
  const Matcher m(g);
  int n = 0;
  for (const Node& t : g.nodes) {
    if (!is_default(t, "Transpose") || t.inputs.empty() || t.outputs.empty() || t.outputs[0] < 0) continue;
    const Value& w = g.values[static_cast<size_t>(t.inputs[0])];
    const auto perm = t.attr_ints("perm");
    if (!w.constant || w.constant->rank() != 2 || !(perm.empty() || perm == std::vector<int64_t>{1, 0})) continue;
    const int y = t.outputs[0];
    if (std::count(g.outputs.begin(), g.outputs.end(), y) || m.consumers(y).empty()) continue;
    bool all_matmuls = true;
    for (int k : m.consumers(y)) {
      const Node& c = g.nodes[static_cast<size_t>(k)];
      all_matmuls &= is_default(c, "MatMul") && c.inputs.size() == 2 && c.inputs[1] == y && c.inputs[0] != y;
    }
    if (!all_matmuls) continue;
    for (int k : m.consumers(y)) {
      Node& c = g.nodes[static_cast<size_t>(k)];
      c.op_type = "FusedMatMul";
      c.domain = "com.microsoft";
      c.inputs[1] = t.inputs[0];
      Attribute trans;
      trans.kind = Attribute::Kind::Int;
      trans.i = 1;
      c.attrs["transB"] = trans;
      ++n;
    }
  }
  if (n) g.opsets.emplace("com.microsoft", 1);
  link_producers(g);
  return n;
}

int canonicalize(Graph& g) {
  const int n = remove_no_op_nodes(g) + remove_round_trip_casts(g);
  link_producers(g);
  return n;
}

int cache_io_in_compute_type(Graph& g) {
  link_producers(g);
  const Matcher m(g);
  int changed = 0;
  std::vector<int> narrowed;  // the cache inputs now of their Casts' type
  for (int in : g.inputs) {
    Value& v = g.values[static_cast<size_t>(in)];
    if (v.dtype != DType::Float32 || m.rank(in) != 4) continue;
    DType to = DType::Undefined;
    std::vector<int> casts;
    bool only_casts = true;
    for (int k : m.consumers(in)) {
      const Node& n = g.nodes[static_cast<size_t>(k)];
      if (is_default(n, "Shape")) continue;
      const DType t = is_default(n, "Cast") ? static_cast<DType>(n.attr_int("to", 0)) : DType::Undefined;
      if ((t != DType::Float16 && t != DType::BFloat16) || (to != DType::Undefined && t != to)) only_casts = false;
      to = t;
      casts.push_back(n.outputs[0]);
    }
    if (!only_casts || casts.empty()) continue;
    v.dtype = to;
    for (int c : casts) redirect(g, c, in);
    narrowed.push_back(in);
    ++changed;
  }
  // A graph output that is a Concat of a narrowed input, Cast back to float32: the Concat's value becomes the output
  // (named as it was: the generator pairs past and present by name).
  for (int& out : g.outputs) {
    const Node* cast = m.producer(out);
    const Node* concat = cast && is_default(*cast, "Cast") && static_cast<DType>(cast->attr_int("to", 0)) == DType::Float32
                             ? m.producer(cast->inputs[0])
                             : nullptr;
    if (!concat || !is_default(*concat, "Concat") || std::none_of(concat->inputs.begin(), concat->inputs.end(), [&](int x) {
          return std::count(narrowed.begin(), narrowed.end(), x) > 0;
        }))
      continue;
    const int z = cast->inputs[0];
    if (m.is_output(z)) continue;
    std::string& zn = g.values[static_cast<size_t>(z)].name;
    std::string& on = g.values[static_cast<size_t>(out)].name;
    g.value_ids.erase(zn);
    std::swap(zn, on);
    on += "/float32";
    g.value_ids[zn] = z;
    g.value_ids[on] = out;
    out = z;
    ++changed;
  }
  link_producers(g);
  return changed;
}

}  // namespace tern
