// The decoder families tern's converters write, as data. A family differs from Llama in a few named ways (RoPE
// pairing, q/k/v biases, a norm over each head of q and k …); the GGUF importer reads the tensors and
// hyperparameters those flags name, and write_decoder_onnx builds the graph a real exporter writes for the
// weights it is given. Adding a family is a row in architecture.cpp plus its fixture and test — README.md here
// walks through it.
#pragma once
#include <string>
#include <string_view>

namespace tern::convert {

enum class RopePairs {
  Interleaved,  // (2i, 2i+1), as llama2.c rotates and llama.cpp's "llama" (its converter permutes Q/K rows to match)
  Halves,       // (i, i + d/2), GPT-NeoX's order, as Qwen rotates (llama.cpp's NEOX rope type; rows unpermuted)
};

struct Architecture {
  std::string_view gguf_name;   // GGUF general.architecture
  std::string_view model_type;  // config.json "model_type" of the folder written
  std::string_view hf_class;    // config.json "architectures"[0]
  RopePairs rope = RopePairs::Interleaved;
  bool qkv_bias = false;  // the q, k and v projections add a bias (blk.N.attn_q.bias …)
  bool qk_norm = false;   // an RMSNorm over each head of q and of k, before RoPE (blk.N.attn_q_norm.weight …)
  // Gemma: embeddings times √hidden, an RMSNorm after attention and after the MLP too
  // (blk.N.post_attention_norm / post_ffw_norm), GELU (tanh) instead of SiLU on the gate.
  bool gemma = false;
  // Sliding-window layers: with attention.sliding_window in the metadata (or swa_window without it), every
  // layer when swa_pattern is 0 or 1, else all but every swa_pattern-th (llama.cpp's default for the family;
  // attention.sliding_window_pattern, a number or one bool per layer, overrides it), with RoPE base
  // swa_rope_base (rope.freq_base_swa overrides it; 0: the global base) on the windowed layers. A window in
  // the metadata of a family without a pattern (Mistral 7B v0.1's 4096, Phi-3-mini's 2047, Qwen2 with
  // use_sliding_window) windows every layer, as transformers runs those models; llama.cpp ignores it for
  // llama and phi3, so past the window the two differ there.
  int swa_pattern = 0;
  int64_t swa_window = 0;  // the window when the metadata names none (Gemma 2: 4096); 0: then no window
  double swa_rope_base = 0;
  // tanh soft-capping of attention scores and of the logits (Gemma 2): these defaults, or the metadata's
  // attn_logit_softcapping / final_logit_softcapping (0: none).
  double attn_softcap = 0, final_softcap = 0;
  // The variant with this many layers scales queries by 1/√(hidden/heads), the others by 1/√head (Gemma's
  // 27B, as llama.cpp reads Gemma's config).
  int64_t hidden_scale_layers = 0;
  // Phi-3: q, k and v in one tensor (blk.N.attn_qkv, or apart), gate and up in one (blk.N.ffn_up: gate rows
  // first), split into the projections a Llama has.
  bool fused_projections = false;
};

// The family a GGUF's general.architecture names; fails naming the file and the families tern imports.
const Architecture& gguf_architecture(std::string_view gguf_name, const std::string& file);

}  // namespace tern::convert
