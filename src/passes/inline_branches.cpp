#include "passes/inline_branches.h"

#include <algorithm>
#include <set>
#include <string>

namespace tern {
namespace {

// Optimum's name for the merged decoder's branch flag (optimum/onnx/graph_transformations.py merge_decoders).
constexpr const char* kUseCacheBranch = "use_cache_branch";

std::string unused_name(const Graph& g, const std::string& base) {
  if (g.find_value(base) < 0) return base;
  for (int k = 1;; ++k)
    if (const std::string name = base + "/" + std::to_string(k); g.find_value(name) < 0) return name;
}

// The branch `b` of `node` as nodes of `g`: its free values are `g`'s of the same name (the node's inputs, graph/ir.h
// outer_values_read), its initializers new constants, its outputs the node's outputs.
std::vector<Node> branch_nodes(Graph& g, const Node& node, const Graph& b, std::set<std::string>& node_names) {
  std::vector<int> to(b.values.size(), -1);
  std::vector<Node> nodes;
  for (size_t i = 0; i < b.outputs.size(); ++i) {
    const int v = b.outputs[i];
    const Value& bv = b.values[static_cast<size_t>(v)];
    if (bv.producer >= 0 && to[static_cast<size_t>(v)] < 0) {
      to[static_cast<size_t>(v)] = node.outputs[i];
      continue;
    }
    Node copy;  // (an output that is an input, a constant, an outer value or another output: an Identity of it)
    copy.op_type = "Identity";
    copy.name = node.name + "/output" + std::to_string(i);
    copy.opset = node.opset;
    copy.inputs = {-2 - v};  // (resolved below, once every value has its id)
    copy.outputs = {node.outputs[i]};
    nodes.push_back(std::move(copy));
  }
  for (size_t v = 0; v < b.values.size(); ++v) {
    if (to[v] >= 0) continue;
    const Value& bv = b.values[v];
    const bool inner = bv.producer >= 0 || bv.constant || std::count(b.inputs.begin(), b.inputs.end(), static_cast<int>(v));
    if (!inner) {
      to[v] = g.find_value(bv.name);
      if (to[v] < 0) fail(node.describe(), ": its branch '", b.name, "' reads '", bv.name, "', which nothing outside it makes");
      continue;
    }
    const std::string name = unused_name(g, bv.name);
    to[v] = bv.constant ? g.add_constant(name, *bv.constant) : g.add_value(name);
    Value& outer = g.values[static_cast<size_t>(to[v])];
    outer.dtype = bv.dtype;
    outer.shape = bv.shape;
  }
  std::vector<Node> inlined;
  for (const Node& n : b.nodes) {
    Node copy = n;
    for (int& id : copy.inputs)
      if (id >= 0) id = to[static_cast<size_t>(id)];
    for (int& id : copy.outputs)
      if (id >= 0) id = to[static_cast<size_t>(id)];
    while (!node_names.insert(copy.name).second) copy.name += "/" + b.name;
    inlined.push_back(std::move(copy));
  }
  for (Node& n : nodes) {
    n.inputs[0] = to[static_cast<size_t>(-2 - n.inputs[0])];
    inlined.push_back(std::move(n));
  }
  return inlined;
}

// merge_decoders declares the merged graph's inputs as the decoder without past does: there attention_mask spans the
// new tokens ([batch, sequence_length]); the branch with past reads it as past + new, as model.onnx declares it.
void declare_mask_over_past(Graph& g) {
  const int mask = g.find_value("attention_mask"), ids = g.find_value("input_ids"), past = g.find_value("past_key_values.0.key");
  if (mask < 0 || ids < 0 || past < 0) return;
  auto& m = g.values[static_cast<size_t>(mask)].shape;
  const auto& i = g.values[static_cast<size_t>(ids)].shape;
  const auto& p = g.values[static_cast<size_t>(past)].shape;
  if (m && i && p && m->size() == 2 && i->size() == 2 && p->size() == 4 && (*m)[1] == (*i)[1] && !(*p)[2].is_known())
    (*m)[1] = dim_sum((*p)[2], (*i)[1]);
}

}  // namespace

int inline_known_branches(Graph& g, MergedDecoder* merged) {
  std::set<std::string> node_names;
  for (const Node& n : g.nodes) node_names.insert(n.name);
  std::vector<Node> nodes;
  int inlined = 0;
  for (Node& n : g.nodes) {
    const Attribute* then_branch =
        n.op_type == "If" && n.domain.empty() && !n.inputs.empty() && n.inputs[0] >= 0 ? n.attr("then_branch") : nullptr;
    const Attribute* else_branch = then_branch ? n.attr("else_branch") : nullptr;
    if (!then_branch || !else_branch || !then_branch->g || !else_branch->g) {
      nodes.push_back(std::move(n));
      continue;
    }
    const Value& cond = g.values[static_cast<size_t>(n.inputs[0])];
    const bool merged_decoder = cond.name == kUseCacheBranch && std::count(g.inputs.begin(), g.inputs.end(), n.inputs[0]);
    const bool known = cond.constant && cond.constant->dtype() == DType::Bool && cond.constant->numel() == 1;
    if (!merged_decoder && !known) {
      nodes.push_back(std::move(n));
      continue;
    }
    const bool taken = merged_decoder || static_cast<const uint8_t*>(cond.constant->raw())[0] != 0;
    if (merged_decoder && merged) merged->flag = cond.name;
#ifndef TERN_MINIMAL  // (its reader, Session::run's dummy past, is not in that build)
    if (merged_decoder && merged) {
      Node without_past;  // (outer_values_read of the branch without past alone)
      without_past.attrs["else_branch"] = *else_branch;
      const std::vector<std::string> other = outer_values_read(without_past);
      for (const std::string& name : outer_values_read(n))
        if (const int id = g.find_value(name);
            std::count(g.inputs.begin(), g.inputs.end(), id) && name != cond.name && !std::binary_search(other.begin(), other.end(), name))
          merged->past.push_back(name);
    }
#endif
    const Graph& b = *(taken ? then_branch : else_branch)->g;
    if (b.outputs.size() != n.outputs.size() || !b.inputs.empty())
      fail(n.describe(), ": branch '", b.name, "' makes ", b.outputs.size(), " outputs and takes ", b.inputs.size(), " inputs; the If has ",
           n.outputs.size(), " outputs and its branches take none");
    for (Node& m : branch_nodes(g, n, b, node_names)) nodes.push_back(std::move(m));
    if (merged_decoder) declare_mask_over_past(g);
    ++inlined;
  }
  g.nodes = std::move(nodes);
  if (inlined > 0) topological_sort(g);
  return inlined;
}

}  // namespace tern
