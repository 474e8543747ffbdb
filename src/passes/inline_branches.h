// If nodes whose branch is known at load become that branch's nodes, so the passes after see one flat graph.
#pragma once
#include "graph/ir.h"

namespace tern {

// Inlines, in place of the If:
// - an If whose cond is a constant: its taken branch (exact);
// - Optimum's merged decoder (decoder_model_merged.onnx, older onnx-community repositories): one If on the graph input
//   `use_cache_branch`, then_branch the decoder with past inputs, else_branch the one without. With an empty past
//   (length 0, what a first step feeds) the with-past branch computes the same tokens — Concat(past, new) is the new
//   keys — so it is inlined whatever the flag says: the graph becomes model.onnx's, fused onto the ring like it, and
//   `use_cache_branch` stays an input read by nothing (callers feed it as before). The exporter matrix's merged cells
//   check it against ONNX Runtime running the branch without past at the prefill.
// Branch values get names unused in `g` (a suffix where one is taken); the If's outputs keep theirs. Returns how many
// If nodes were inlined.
int inline_known_branches(Graph& g);

}  // namespace tern
