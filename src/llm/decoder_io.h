// How a decoder graph takes its inputs and cache, detected from input/output names and types:
//   Optimum / onnxruntime-genai: past_key_values.N.key|value → present.N.key|value, [B, H, S, D]
//     (a fixed S in the input's declared shape: a static cache of that many positions — opset-24
//     TensorScatter writes the new tokens at index past length, present has the same shape as past)
//   ORT transformer optimizer (GPT-2): past_N → present_N stacked as [2, B, H, S, D]
//   no past inputs at all: the whole sequence is recomputed each step.
#pragma once
#include <string>
#include <vector>

#include "runtime/session.h"

namespace tern::llm {

// Internal: the session holds the cache (ring buffer); the generator feeds only new tokens.
enum class PastLayout { None, PerLayerKeyValue, Stacked, Internal };

struct DecoderIO {
  std::string input_ids, attention_mask, position_ids, logits;  // mask/positions "" when absent
  // Optimum's merged decoder's branch flag (passes/inline_branches.h), "" when absent: fed true, the branch with past
  // (an empty past at the first step).
  std::string use_cache_branch;
  // The positions whose logits come back (passes/fuse_blocks.h's kLogitsPositionsInput), "" when the graph computes
  // every position's: fed [-1], or a speculative step's last n.
  std::string logits_positions;
  DType ids_dtype = DType::Int64;  // input_ids, attention_mask and position_ids share it
  PastLayout layout = PastLayout::None;
  std::vector<std::string> past, present;  // per layer: key then value (PerLayerKeyValue) or one (Stacked)
  DType cache_dtype = DType::Float32;
  int64_t kv_heads = 0, head_size = 0;
  int64_t cache_capacity = 0;  // > 0: static cache buffers of this many positions
  int64_t vocab = 0;           // the logits' last dimension where the graph fixes it, else 0
  // Internal layout whose attention_mask only CachedAttention reads (it looks at the new tokens'
  // columns): the generator feeds just those columns, so every decode step has the same input shapes
  // and replays the session's step plan.
  bool mask_new_tokens_only = false;
  // Internal: the smallest window of the layers' rings (a local-attention layer's may be shorter) — how many tokens a
  // sequence holds before some ring slides.
  int64_t ring_window = 0;
  // The graph's attention keeps its own cache and reads a batch's prompts right-padded (passes/pipeline.h's
  // reads_prompts_right_padded: GroupQueryAttention): the generator pads after each prompt, not before.
  bool prompts_right_padded = false;
};

// Fails (UnsupportedError) with the model's input and output names when no convention fits.
DecoderIO detect_decoder_io(const Session& session);

}  // namespace tern::llm
