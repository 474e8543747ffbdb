#include "convert/architecture.h"

#include "core/error.h"

namespace tern::convert {

namespace {

// One row per family. What each flag changes: architecture.h; how a row is tested: README.md.
constexpr Architecture kArchitectures[] = {
    // Llama 2/3, SmolLM, Mistral-style GGUFs and llama2.c checkpoints.
    {.gguf_name = "llama", .model_type = "llama", .hf_class = "LlamaForCausalLM"},
    // Qwen2 / Qwen2.5: biases on q, k, v; NeoX RoPE.
    {.gguf_name = "qwen2", .model_type = "qwen2", .hf_class = "Qwen2ForCausalLM", .rope = RopePairs::Halves, .qkv_bias = true},
    // Qwen3 (dense): no biases, QK-norm; head size from attention.key_length (wider than hidden / heads).
    {.gguf_name = "qwen3", .model_type = "qwen3", .hf_class = "Qwen3ForCausalLM", .rope = RopePairs::Halves, .qk_norm = true},
    // Phi-3 (mini, medium): fused qkv and gate_up; NeoX RoPE (the 128k variants' RoPE factors are refused).
    {.gguf_name = "phi3", .model_type = "phi3", .hf_class = "Phi3ForCausalLM", .rope = RopePairs::Halves, .fused_projections = true},
    // Gemma 2: pre- and post-norms, scaled embeddings, GeGLU; sliding-window layers alternate with global ones
    // (one RoPE base); attention scores and logits soft-capped.
    {.gguf_name = "gemma2",
     .model_type = "gemma2",
     .hf_class = "Gemma2ForCausalLM",
     .rope = RopePairs::Halves,
     .gemma = true,
     .swa_pattern = 2,
     .swa_window = 4096,
     .attn_softcap = 50,
     .final_softcap = 30,
     .hidden_scale_layers = 46},
    // Gemma 3 (text): QK-norm, pre- and post-norms, scaled embeddings, GeGLU; five sliding-window layers
    // (RoPE base 10^4) to one global (rope.freq_base); tied embeddings.
    {.gguf_name = "gemma3",
     .model_type = "gemma3_text",
     .hf_class = "Gemma3ForCausalLM",
     .rope = RopePairs::Halves,
     .qk_norm = true,
     .gemma = true,
     .swa_pattern = 6,
     .swa_rope_base = 10000.0,
     .hidden_scale_layers = 62},
};

}  // namespace

const Architecture& gguf_architecture(std::string_view gguf_name, const std::string& file) {
  std::string known;
  for (const Architecture& a : kArchitectures) {
    if (a.gguf_name == gguf_name) return a;
    known += (known.empty() ? "" : ", ") + std::string(a.gguf_name);
  }
  fail_unsupported("'", file, "': architecture '", gguf_name, "' is not imported yet (tern imports ", known, ")");
}

}  // namespace tern::convert
