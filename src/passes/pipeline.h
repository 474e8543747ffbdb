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

// The graph output expose_hidden_state adds (DecoderRewrites::hidden_state_of): Hugging Face's name for it.
inline constexpr const char* kHiddenStateOutput = "last_hidden_state";

// How the pipeline reshapes a decoder for generation, all in one place: what the LLM layer asks of a session
// (SessionOptions::decoder; llm/model_folder.cpp's decoder_session_options fills it for generation, serve and the C
// API). The defaults leave a graph as its file has it.
struct DecoderRewrites {
  // > 0: attention layers that match fuse_cached_attention keep their keys/values in a ring buffer of this many
  // tokens inside the session (past/present inputs and outputs disappear), with `kv_sinks` leading tokens kept once
  // the window slides. 0: the graph's own past/present cache.
  int64_t ring_capacity = 0;
  int64_t kv_sinks = 4;
  kernels::KvStorage kv_dtype = kernels::KvStorage::F32;  // ring storage (--kv-dtype)
  // With a ring: true fails when no layer matches; false lets such a graph keep its own cache.
  bool ring_required = true;
  // Generation reads only the last position's logits: compute no others (the graph output named here then has
  // sequence length 1). Empty: the graph's outputs as they are.
  std::string last_position_output;
  // Embeddings from a decoder: the input of the projection that makes the graph output named here (the logits) —
  // the final norm's output — becomes graph output kHiddenStateOutput too, [B, S, hidden] at every position
  // (passes/fuse_blocks.h: expose_hidden_state). Empty: none.
  std::string hidden_state_of;
};

struct PipelineOptions {
  bool optimize = true;  // constant folding, dead-node removal and the fusions
  DecoderRewrites decoder;
  WeightPack* pack = nullptr;  // the session's pack, for the weights fusions make (fuse_shared_input_matmuls)
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
