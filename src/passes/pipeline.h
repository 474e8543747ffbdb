// The order the passes run in, in one place: fold → canonicalize → the ring-buffer cache → the
// last-position slice → fusions → shape values → merging duplicates. Session::prepare runs it once.
#pragma once
#include <string>
#include <vector>

#include "passes/attention/attention.h"
#include "passes/fuse_blocks.h"
#include "passes/inline_branches.h"
#include "passes/passes.h"

namespace tern {

// The graph output expose_hidden_state adds (SessionOptions::hidden_state_of): Hugging Face's name for it.
inline constexpr const char* kHiddenStateOutput = "last_hidden_state";

struct PipelineOptions {
  bool optimize = true;  // constant folding, dead-node removal and the fusions
  // > 0: attention layers become CachedAttention over a ring of this many tokens (SessionOptions::ring_capacity).
  int64_t ring_capacity = 0;
  int64_t kv_sinks = 4;
  DType kv_dtype = DType::Float32;
  bool ring_required = true;         // fail when no layer matches
  std::string last_position_output;  // graph output generation reads only the last position of
  std::string hidden_state_of;       // graph output (the logits) whose projection's input becomes kHiddenStateOutput
  WeightPack* pack = nullptr;        // the session's pack, for the weights fusions make (fuse_shared_input_matmuls)
};

struct PipelineResult {
  PassStats stats;
  std::vector<Fusion> fusions;     // rewrites made, in order
  std::vector<FusionMiss> misses;  // why attention did not become ring layers (with a window)
  int cached_layers = 0;
  MergedDecoder merged;  // an Optimum merged decoder inlined: its flag and past inputs (passes/inline_branches.h)
};

// Whether `g` holds attention that reads a batch's prompts right-padded: com.microsoft GroupQueryAttention (what
// the onnxruntime-genai builder writes) places each row's keys at [0, seqlens_k + 1), seqlens_k the row's mask sum
// less one, so a shorter prompt's padding must come after it and its last token is not at the last position.
bool reads_prompts_right_padded(const Graph& g);

// Rewrites `g` in place; errors name `model_path`.
PipelineResult optimize_graph(Graph& g, const PipelineOptions& options, const std::string& model_path);

}  // namespace tern
