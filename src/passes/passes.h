// Load-time graph passes. Each keeps results identical to running the original graph.
#pragma once
#include "graph/ir.h"

namespace tern {

struct PassStats {
  int folded_nodes = 0;   // nodes replaced by constants
  int removed_nodes = 0;  // nodes nothing consumes
  int canonicalized = 0;  // no-op nodes, round-trip Casts, transposed MatMul weights (passes/canonicalize.h)
  int shape_values = 0;   // shape arithmetic made tern::DimsOf nodes (passes/shape_values.h)
  int merged_nodes = 0;   // duplicates of an earlier node (merge_duplicate_nodes)
};

// Walks nodes in order: applies each op's shape rule to (symbolic) input shapes, and when every input
// is a known value (initializers, Constant, Shape of a fully known shape…) runs the node once and
// turns its outputs into constants.
void infer_and_fold(Graph& g, PassStats* stats = nullptr, bool fold = true);
// Drops nodes whose outputs reach no graph output.
void remove_dead_nodes(Graph& g, PassStats* stats = nullptr);

}  // namespace tern
