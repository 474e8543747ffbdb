// The ONNX decoder tern's converters write (llama2.c checkpoints, GGUF files): one graph for every family in
// architecture.h, in the Optimum layout (input_ids, attention_mask, position_ids, past_key_values.N.key/value →
// logits, present.N.key/value), from standard opset-23 ops — Gather or com.microsoft GatherBlockQuantized,
// RMSNormalization, MatMul or com.microsoft MatMulNBits (+ Add for a bias), RotaryEmbedding, Attention (GQA,
// past/present, a sliding window in its mask), Sigmoid·Mul or Gelu — the shapes the ring-buffer fusion takes
// whole. The graph has what the weights have: a bias is added where one is given, a per-head norm applied
// where one is given; the RoPE pairing and the Gemma traits come from the architecture.
#pragma once
#include <string>
#include <vector>

#include "convert/architecture.h"
#include "core/tensor.h"

namespace tern::convert {

struct DecoderShape {
  const Architecture* arch = nullptr;
  int64_t layers = 0, hidden = 0, ffn = 0, heads = 0, kv_heads = 0, vocab = 0;
  int64_t head_dim = 0;  // 0: hidden / heads
  float rms_eps = 1e-5f;
  int64_t rotary_dim = 0;             // 0: the head size
  std::vector<int64_t> local_window;  // per layer: > 0 attends to its last `local_window` keys only; empty or 0: all
  float attn_scale = 0;               // 0: 1/√head
  float attn_softcap = 0;             // > 0: scores soft-capped, c·tanh(s/c) (Attention's softcap)
  float final_softcap = 0;            // > 0: logits soft-capped the same way
  int64_t head() const { return head_dim ? head_dim : hidden / heads; }
};

// A projection y = x · W (+ bias) with W [K, N]: a float matrix for MatMul, or MatMulNBits blocks (N rows of
// K/block blocks, 4 or 8 bits each; scales [N · K/block]; zero_points empty (the default 2^(bits−1)) or
// float [N · K/block]).
struct Projection {
  Tensor matrix;  // [K, N] float32, or undefined when the blocks below are set
  Tensor blocks, scales, zero_points;
  Tensor bias;  // [N] float32, or undefined
  int64_t K = 0, N = 0, bits = 0, block = 0;
  // MatMulNBits' accuracy_level: 4 asks runtimes for int8 activations (llama.cpp's arithmetic on GGUF blocks).
  int64_t accuracy_level = 0;
};

struct DecoderLayer {
  Tensor attn_norm, ffn_norm;            // [hidden] float32
  Tensor q_norm, k_norm;                 // [head size] float32, or undefined (no QK-norm)
  Tensor attn_post_norm, ffn_post_norm;  // [hidden] float32 (Gemma), or undefined
  Projection q, k, v, o, gate, up, down;
};

struct DecoderWeights {
  Tensor embed;  // [vocab, hidden] float32 (Gather reads one row per token), or undefined when blocks are:
  // the table as blocks (N = vocab rows of K = hidden), which GatherBlockQuantized reads as they lie (and a
  // tied LM head's MatMulNBits too: one copy in the file); float zero points make the folder tern's only
  Projection embed_blocks;
  Tensor cos, sin;              // [positions, rotary_dim / 2] float32
  Tensor cos_local, sin_local;  // the sliding-window layers' own tables (Gemma's second RoPE base), or undefined
  std::vector<DecoderLayer> layers;
  Tensor final_norm;
  Projection lm_head;  // unused when tied
  // Tied embeddings kept as one tensor: the LM head is MatMul(h, Transpose(embed)), or MatMulNBits over
  // embed_blocks — the file holds the table once (runtimes repack it as it lies: passes/canonicalize.h).
  bool tied = false;
};

// Writes `out_dir`/model.onnx and model.onnx.data (creating the folder).
void write_decoder_onnx(const DecoderShape& shape, const DecoderWeights& w, const std::string& out_dir, const std::string& graph_name);

// RoPE's inverse frequencies θ^(−2i/rotary_dim), i < rotary_dim/2, in float (as llama2.c's run.c, llama.cpp and
// transformers compute them).
std::vector<float> rope_frequencies(int64_t rotary_dim, float theta);
// RoPE tables cos/sin(p · freq_i) · attention_factor for p < positions (YaRN scales both by its attention factor).
void rope_tables(int64_t positions, const std::vector<float>& freq, float attention_factor, Tensor& cos, Tensor& sin);

}  // namespace tern::convert
