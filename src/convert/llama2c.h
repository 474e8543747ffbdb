// llama2.c checkpoints (karpathy/llama2.c `model.bin` + `tokenizer.bin`) → an ONNX model folder in the
// Optimum layout (input_ids, attention_mask, position_ids, past_key_values.N.key/value → logits,
// present.N.key/value), written from the file format with standard opset-23 ops: Gather, RMSNormalization,
// MatMul, RotaryEmbedding (interleaved pairs, as llama2.c rotates), Attention (GQA, past/present), SwiGLU.
#pragma once
#include <string>

namespace tern::convert {

struct Llama2cConfig {
  int dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
  bool shared_classifier = true;
  int version = 0;  // 0: legacy header, 1: "ak42" fp32
};

// Reads the header of a llama2.c checkpoint; fails naming the file when it is not one tern can read.
Llama2cConfig read_llama2c_config(const std::string& checkpoint);

// Writes model.onnx, model.onnx.data, config.json, generation_config.json and tokenizer.bin into `out_dir`.
void convert_llama2c(const std::string& checkpoint, const std::string& tokenizer, const std::string& out_dir);

}  // namespace tern::convert
