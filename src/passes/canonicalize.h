// Canonicalization: load-time rewrites that make different exporters' spellings of the same math one
// spelling before the fusion passes look for patterns. Each is exact: results stay bit-for-bit what the
// original graph computes. Needs linked producers; leaves what it bypasses for remove_dead_nodes.
//
// What the fusion matchers accept without a pass here, because one spelling covers it: Mul or Div by a
// constant scale on Q, K or QKᵀ (folded into one scale); float Casts around Softmax and SDPA's
// Where(IsNaN(p), 0, p) guard; repeat_kv in any data-movement spelling (checked on a probe); masks
// built any way from attention_mask (checked on a probe); RMSNorm with fp32 Casts around it.
#pragma once
#include "graph/ir.h"

namespace tern {

// Identity; Dropout with no mask output read (inference); a Concat of one input (TorchScript passes caches through
// them); Cast to the type its input already has; Reshape to the shape its input already has, dim by dim (a known
// size or the same symbol: [B, H, S, D] → Reshape [B, -1, S, D]). Their readers read the input instead (a graph
// output keeps its node). Returns how many were bypassed.
int remove_no_op_nodes(Graph& g);
// Cast(A→B) → Cast(B→A) where B holds every value of A exactly (f16/bf16 → f32 → back, int32 → int64 →
// int32, …): readers of the second read the first's input. Returns how many pairs were bypassed.
int remove_round_trip_casts(Graph& g);
// Both, in that order. Returns the total.
int canonicalize(Graph& g);
// For the ring-buffer fusion (a window asked for): a float32 KV cache the graph takes in and gives out around attention
// that computes in float16 or bfloat16 (onnxconverter-common's float16 conversion with keep_io_types:
// transformers.js's model_fp16 and model_q4f16) — past → Cast(float16) → Concat → Cast(float32) → present — becomes a
// cache of the compute type: the past inputs take the Casts' type (their Casts bypassed), and each present output is
// the Concat's value itself. Exact: a float16 value cast to float32 and back is itself. Returns how many inputs and
// outputs changed.
int cache_io_in_compute_type(Graph& g);
// MatMul(x, Transpose(W)) with W a constant 2-D matrix (perm absent or [1, 0]) and every reader of the
// Transpose such a MatMul → com.microsoft FusedMatMul(x, W, transB = 1): exact, and run before constant
// folding, so no transposed copy of W is ever made — the MatMul repacks W as it lies, and a tied LM head
// shares the embedding table Gather reads (one copy of it in the file and in memory). Returns how many.
int matmul_transposed_weights(Graph& g);

}  // namespace tern
