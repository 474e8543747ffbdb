#include "passes/passes.h"

#include "ops/execute.h"

namespace tern {

void infer_and_fold(Graph& g, PassStats* stats, bool fold) {
  const auto& registry = OpRegistry::instance();
  // Folding runs its kernels on the loading thread, with scratch of its own: what it folds is shape arithmetic
  // and small constants, not worth a pool's threads.
  kernels::Workspace scratch;
  const kernels::Context cpu{1, &scratch};
  for (Node& node : g.nodes) {
    if (!registry.has(node.domain, node.op_type)) continue;
    auto op = registry.create(node);
    std::vector<InferContext::Input> infos(node.inputs.size());
    std::vector<const Tensor*> values(node.inputs.size(), nullptr);
    bool all_known = true;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      int id = node.inputs[i];
      if (id < 0) continue;
      const Value& v = g.values[static_cast<size_t>(id)];
      infos[i] = {v.dtype, v.shape ? &*v.shape : nullptr, v.constant ? &*v.constant : nullptr, true, v.sym_value ? &*v.sym_value : nullptr};
      values[i] = infos[i].value;
      if (!v.constant) all_known = false;
    }
    if (fold && all_known && op->traits().foldable) {
      std::vector<Tensor> copies;  // (misaligned views of the file read typed: aligned copies, this fold only)
      copies.reserve(values.size());
      for (const Tensor*& t : values)
        if (t && !is_aligned(*t)) t = &copies.emplace_back(t->clone());
      auto outs = execute_node(*op, node, values, allocate_on_heap, cpu);
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i] < 0 || !outs[i].defined()) continue;
        Value& v = g.values[static_cast<size_t>(node.outputs[i])];
        v.constant = outs[i].buffer() ? outs[i] : outs[i].clone();
        v.dtype = outs[i].dtype();
        v.shape = sym_shape(outs[i].shape());
        v.shape_inferred = true;
      }
      if (stats) ++stats->folded_nodes;
      continue;
    }
    InferContext ctx(node, std::move(infos));
    try {
      op->infer(ctx);
    } catch (const ShapeUnknown&) {
      continue;  // leave declared value_info as it was
    } catch (...) {
      rethrow_naming(node);  // (a checked size, core/checked_math.h, does not know its node)
    }
    bool all_values = fold && op->traits().foldable;
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] < 0 || !ctx.outputs[i].shape) continue;
      Value& v = g.values[static_cast<size_t>(node.outputs[i])];
      v.dtype = ctx.outputs[i].dtype;
      v.shape = ctx.outputs[i].shape;
      v.shape_inferred = true;
      v.sym_value = ctx.outputs[i].sym_value;
      if (!ctx.outputs[i].value) all_values = false;
    }
    if (all_values) {  // the shape rule computed the outputs itself (Shape of known dims, …)
      for (size_t i = 0; i < node.outputs.size(); ++i)
        if (node.outputs[i] >= 0) g.values[static_cast<size_t>(node.outputs[i])].constant = ctx.outputs[i].value;
      if (stats) ++stats->folded_nodes;
    }
  }
  // Nodes whose outputs are all constants now are dead weight.
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    bool all_const = !n.outputs.empty();
    for (int o : n.outputs)
      if (o >= 0 && !g.values[static_cast<size_t>(o)].constant) all_const = false;
    if (!all_const) kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  link_producers(g);
}

void remove_dead_nodes(Graph& g, PassStats* stats) {
  std::vector<char> live(g.values.size(), 0);
  for (int o : g.outputs) live[static_cast<size_t>(o)] = 1;
  std::vector<char> keep(g.nodes.size(), 0);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const Node& n = g.nodes[k];
    for (int o : n.outputs)
      if (o >= 0 && live[static_cast<size_t>(o)]) keep[k] = 1;
    if (!keep[k]) continue;
    for (int in : n.inputs)
      if (in >= 0) live[static_cast<size_t>(in)] = 1;
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (keep[k]) kept.push_back(std::move(g.nodes[k]));
    else if (stats) ++stats->removed_nodes;
  }
  g.nodes = std::move(kept);
  link_producers(g);
}

}  // namespace tern
