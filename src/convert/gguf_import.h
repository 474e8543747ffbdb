// GGUF → ONNX model folder (`tern import-gguf`): a converter, so the runtime stays ONNX-only. GGUFs of the
// families in architecture.h (llama: Llama, SmolLM, Mistral-style; qwen2; qwen3) become write_decoder_onnx's graph with
// the weights' exact values: Q4_0 / Q4_1 / Q8_0 projections become com.microsoft MatMulNBits blocks (Q4_1's
// per-block min a float zero point, nibbles reordered, no requantization); every other type ggml decodes
// (F16, BF16, Q5_0/Q5_1, the K-quants) becomes float32 as ggml computes it, as does the token embedding
// (for Gather). The folder also gets config.json, generation_config.json, tokenizer.json built from the
// GGUF tokenizer metadata (gpt2-style BPE) and the chat template. Other architectures, tokenizers and
// types fail naming the architecture or the tensor.
#pragma once
#include <string>

namespace tern::convert {

void import_gguf(const std::string& gguf_path, const std::string& out_dir);

}  // namespace tern::convert
