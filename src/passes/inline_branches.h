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
//
// A merged decoder's callers may still take the other branch: Optimum's ORTModelForCausalLM feeds use_cache_branch
// false at the first step with a dummy past of length 1, which that branch never reads. `merged` (when given and a
// merged decoder was inlined) then names the flag and the inputs only the with-past branch reads, so the session can
// feed those empty when the flag is false (MergedDecoder::empty_past) — what the branch without past computes.
struct MergedDecoder {
  std::string flag;               // "" when the graph was no merged decoder
  std::vector<std::string> past;  // graph inputs the with-past branch reads and the other does not (none: TERN_MINIMAL)
};
int inline_known_branches(Graph& g, MergedDecoder* merged = nullptr);

}  // namespace tern
