// The block fusions (fuse_blocks.cpp): norms, SwiGLU, shared-input products, last-position slicing.
#pragma once
#include <string>
#include <vector>

#include "graph/ir.h"
#include "passes/fusion.h"

namespace tern {

class WeightPack;  // graph/weight_pack.h

// For embeddings from a decoder: the input of the vocabulary projection that makes graph output `logits` (the
// final norm's output, Hugging Face's last_hidden_state; found back through a bias, a logit scale, soft-capping or
// a Cast) becomes graph output `name` too, [B, S, hidden] as float32, for every position. Fails naming the node where the
// walk stopped when no projection makes `logits`.
std::vector<Fusion> expose_hidden_state(Graph& g, const std::string& logits, const std::string& name);
// The graph input slice_logits_to_last_position adds: int64 [n], the run's positions whose logits come back
// (negative: from the end). The generator feeds [-1], or a speculative step's last n positions.
inline constexpr const char* kLogitsPositionsInput = "logits_positions";
// For generation, which reads only the last position's logits: the product that makes graph output
// `output` from [B, S, D] activations (MatMul, or com.microsoft MatMulNBits or MatMulBnb4) gets a tern LastPosition
// node before it, so the vocabulary projection of a prefill runs on one row instead of S (a fifth
// of a 1B model's prefill work at S = 128), also when a Cast of the product alone makes `output` (a float16
// graph's logits widened). It reads graph input kLogitsPositionsInput, so `output` has as many positions as that
// input has entries.
std::vector<Fusion> slice_logits_to_last_position(Graph& g, const std::string& output);
// Then, with the blocks fused: each LastPosition moves up through the nodes that work position by position
// (passes/fuse_blocks.cpp's position_wise: products with constant weights, last-axis norms, SwiGLU, element-wise
// ops) while everything they make is read through LastPosition alone — a prefill runs the last layer's output
// projection and MLP on one row, as llama.cpp does for the outputs it does not return (1/layers of the prefill's
// products). It stops at attention, whose keys and values every position feeds.
std::vector<Fusion> hoist_last_position(Graph& g);

// Decomposed RMSNorm (Pow → ReduceMean → Add ε → Sqrt → Div/Reciprocal → Mul → Mul weight) →
// RMSNormalization.
std::vector<Fusion> fuse_rms_norm(Graph& g);
// Add(a, b) → RMSNormalization(sum) over the last axis, a and b of one shape → com.microsoft
// SkipSimplifiedLayerNormalization(a, b, scale) giving the norm and the sum (the residual stream): one
// pass over the row instead of two, and on a device one launch instead of two.
std::vector<Fusion> fuse_skip_rms_norm(Graph& g);
// gate · Sigmoid(gate) · up → SwiGLU(gate, up) (domain "tern").
std::vector<Fusion> fuse_swiglu(Graph& g);

// DynamicQuantizeLinear → MatMulInteger → Cast → Mul by the scales' product (onnxruntime.quantization's dynamic
// IntegerOps) → com.microsoft DynamicQuantizeMatMul, exact. Run before the hidden state is looked for: the fused
// node is a projection expose_hidden_state passes.
std::vector<Fusion> fuse_dynamic_quantized_matmuls(Graph& g);

// MatMuls with constant 2-D weights that read the same input (Q/K/V projections, gate/up) → one MatMul
// over the concatenated weights, split back — or read packed by SwiGLU / CachedAttention when they are
// its only consumers. Run after the others: it looks for their nodes. The concatenations go through `pack`
// when given (graph/weight_pack.h: a later load takes them from the pack or skips them).
std::vector<Fusion> fuse_shared_input_matmuls(Graph& g, WeightPack* pack = nullptr);

}  // namespace tern
