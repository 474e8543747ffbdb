// Pattern rewrites. Each matches exactly or leaves the graph alone.
#pragma once
#include "graph/ir.h"

namespace tern {

struct CachedAttentionOptions {
  int64_t window = 0;  // ring capacity in tokens
  int64_t sinks = 0;   // leading tokens kept forever once the window slides
};

// RotaryEmbedding(q), RotaryEmbedding(k) → Attention(q', k', v, mask, past_key, past_value) →
// (y, present_key, present_value), with past/present as graph inputs/outputs and a 3-D layout (what
// the llama2.c converter and opset-23 exports write), becomes CachedAttention(q, k, v, cos, sin,
// attention_mask) owning a KvRingBuffer; those past/present graph inputs and outputs are removed.
// Assumes the Attention mask is the usual causal + padding mask built from `attention_mask`.
// Returns the number of layers rewritten.
int fuse_cached_attention(Graph& g, const CachedAttentionOptions& options);

}  // namespace tern
