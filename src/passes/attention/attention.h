// The attention passes (src/passes/attention; README.md there says how to add an attention shape):
// fuse_cached_attention takes each layer onto tern's KV ring; the graph-cache passes make attention that stays
// on the graph's own cache cheaper.
#pragma once
#include <string>
#include <vector>

#include "graph/ir.h"
#include "kernels/kv_storage.h"
#include "passes/fusion.h"

namespace tern {

struct CachedAttentionOptions {
  int64_t ring_capacity = 0;                             // tokens each layer's ring holds (a local window below it: that window)
  int64_t sinks = 0;                                     // leading tokens kept forever once the ring slides
  kernels::KvStorage storage = kernels::KvStorage::F32;  // how the ring stores keys and values
};

// A decoder layer whose attention did not become a CachedAttention: its cache inputs, the node where
// matching stopped (empty when there is none) and why.
struct FusionMiss {
  std::string layer;
  std::string node;
  std::string reason;
  std::string str() const;  // "past_key_values.3.key, past_key_values.3.value: Cast 'attn/Cast_1': …"
};

struct CachedAttentionFusion {
  std::vector<Fusion> fused;
  std::vector<FusionMiss> missed;  // non-empty: nothing was rewritten (all layers or none)
};

// Rewrites each decoder layer's attention with a past/present cache into one CachedAttention node
// (domain "tern") that owns a KvRingBuffer, and removes those past/present graph inputs and outputs.
// It takes the keys before RoPE and the RoPE tables, so it recognizes attention whose rotary embedding
// it can see:
//   - ONNX RotaryEmbedding-23 → Attention-23/24 (opset-23 exports, the llama2.c converter);
//   - ONNX opset-24 static caches: RotaryEmbedding → TensorScatter (linear or circular) into fixed-size
//     past buffers → 4-D Attention-24 with nonpad_kv_seqlen; the write index must be the past length,
//     nonpad_kv_seqlen the total length and the mask causal + padding, all checked on a probe sequence;
//   - com.microsoft RotaryEmbedding → MultiHeadAttention or GroupQueryAttention, and GroupQueryAttention
//     with do_rotary (onnxruntime-genai's model builder; packed QKV too);
//   - decomposed torch/Optimum graphs: MatMul → Reshape → Transpose → rotate-half RoPE (x·cos +
//     Concat(−x₂, x₁)·sin) with cos/sin computed from position_ids and constants → Concat(past, new) →
//     optional repeat_kv (Unsqueeze → Expand → Reshape) → MatMul(Q, Kᵀ) → scale → Add mask → Softmax →
//     MatMul(V) → Transpose → Reshape. The RoPE tables are computed at load by evaluating the graph's
//     own cos/sin subgraph for positions 0…window−1.
// Assumes the attention's mask is the usual causal + padding mask built from the `attention_mask` input
// (ONNX Attention's mask is evaluated on a probe sequence to make sure).
// All layers or none: when one cache input (a float graph input of rank 4 or 5) belongs to no match, or
// the rewritten graph would still need a removed input, the graph is left untouched and `missed` says,
// per layer, where matching stopped and why. A graph with no cache inputs gives an empty result. Needs
// shapes inferred and constants folded (infer_and_fold) beforehand; leaves the replaced nodes for
// remove_dead_nodes.
CachedAttentionFusion fuse_cached_attention(Graph& g, const CachedAttentionOptions& options);

// What attention that stays decomposed (the graph's own cache) reads through repeat_kv and a transpose:
// MatMul(Q, Mul(Transpose(repeat_kv(K)), c)) → FusedMatMul(Q as [B, kv_heads, group·S, D], K, transB, alpha c)
// and MatMul(P, repeat_kv(V)) → MatMul(P as [B, kv_heads, group·S, T], V), reshaped back to query heads —
// no copy of the cache per step (repeat_kv and the transpose checked on a probe, any spelling).
std::vector<Fusion> fuse_kv_matmuls(Graph& g);
// Rotate-half RoPE that stays decomposed (the graph's own cache): x·cos + Concat(−x[D/2:], x[:D/2])·sin,
// or its partial-rotary form, on [B, H, S, D] heads → RotaryEmbedding(x, cos[..., :rot/2], sin[..., :rot/2])
// — one node for fourteen per layer. Only when the tables are [B, 1, S, rot] over x's B and S with equal
// halves (checked on a probe).
std::vector<Fusion> fuse_rotary_embedding(Graph& g);

}  // namespace tern
