// Shape arithmetic resolved at load. Exporters compute reshape targets, expand shapes and slice ends at
// run time from Shape nodes — Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)), [-1],
// [64]) — a few dozen tiny nodes per layer, ~2,000 of the ~2,950 nodes a SmolLM2-135M Optimum export runs
// per decode step. Symbolic inference (infer_and_fold) already knows each such value as dims of the graph
// inputs (Value::sym_value: [batch_size, sequence_length, -1, 64]), so:
//  - resolve_shape_values makes every node whose output is known that way one tern::DimsOf node that reads
//    those inputs' shapes (ops/dims_of.cpp), and the chains that fed it are left for remove_dead_nodes;
//  - merge_duplicate_nodes then makes nodes that compute the same thing one (the same target in every
//    layer becomes one node for the model).
// Both need inferred shapes and linked producers.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace tern {

// Returns how many nodes became tern::DimsOf.
int resolve_shape_values(Graph& g);

// Same op, attributes and inputs (small constants compared by contents), and an op whose outputs depend on its inputs alone
// (`deterministic`: not random, not stateful): readers of the later node read the earlier one's outputs instead. Nodes with subgraph or
// large tensor attributes are left alone. Returns how many nodes were merged.
int merge_duplicate_nodes(Graph& g, const std::function<bool(const Node&)>& deterministic);

}  // namespace tern
