// Pattern rewrites. Each matches exactly or leaves the graph alone.
#pragma once
#include "graph/ir.h"

namespace tern {

struct CachedAttentionOptions {
  int64_t window = 0;  // ring capacity in tokens
  int64_t sinks = 0;   // leading tokens kept forever once the window slides
  DType storage = DType::Float32;  // how the ring stores keys and values (Float32 or Float16)
};

// RotaryEmbedding(q), RotaryEmbedding(k) → attention with past/present as graph inputs/outputs, in a
// 3-D layout, becomes CachedAttention(q, k, v, cos, sin, attention_mask) owning a KvRingBuffer, and
// those past/present graph inputs and outputs are removed. Two forms: ONNX opset-23 RotaryEmbedding →
// Attention (the llama2.c converter, opset-23 exports) and ONNX Runtime's RotaryEmbedding →
// MultiHeadAttention (the onnxruntime-genai model builder). Assumes the attention's mask is the usual
// causal + padding mask built from `attention_mask`. Returns the number of layers rewritten.
int fuse_cached_attention(Graph& g, const CachedAttentionOptions& options);

}  // namespace tern
