// Building blocks the rewriting passes share.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "graph/ir.h"

namespace tern {

// A Reshape of `in` to constant `dims` (0 copies a dim) writing `out` (a new value when -1).
Node reshape_node(Graph& g, const std::string& name, int in, std::vector<int64_t> dims, int out = -1);
// Puts each rewrite's nodes where the node it replaces was (ascending node indices; the rest of each
// pattern is left for remove_dead_nodes).
void replace_with(Graph& g, std::vector<std::pair<size_t, std::vector<Node>>>& rewrites);

}  // namespace tern
