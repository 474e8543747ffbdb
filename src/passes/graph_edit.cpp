#include "passes/graph_edit.h"

namespace tern {

Node reshape_node(Graph& g, const std::string& name, int in, std::vector<int64_t> dims, int out) {
  Node r;
  r.name = name;
  r.op_type = "Reshape";
  const int64_t rank = static_cast<int64_t>(dims.size());
  r.inputs = {in, g.add_constant(name + "/shape", Tensor::from_vector<int64_t>(std::move(dims), {rank}))};
  r.outputs = {out >= 0 ? out : g.add_value(name)};
  return r;
}

void replace_with(Graph& g, std::vector<std::pair<size_t, std::vector<Node>>>& rewrites) {
  if (rewrites.empty()) return;
  std::vector<Node> nodes;
  size_t next = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (next < rewrites.size() && rewrites[next].first == k) {
      for (Node& n : rewrites[next].second) nodes.push_back(std::move(n));
      ++next;
    } else {
      nodes.push_back(std::move(g.nodes[k]));
    }
  }
  g.nodes = std::move(nodes);
  link_producers(g);
}

}  // namespace tern
