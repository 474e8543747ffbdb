// What the LLM layer needs from a model folder's JSON files: config.json (Hugging Face),
// generation_config.json, and genai_config.json (onnxruntime-genai). Missing files leave defaults.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tern::llm {

struct ModelConfig {
  std::string model_type;             // "llama", "gpt2", … ("" when unknown)
  int64_t vocab_size = 0;
  int64_t context_length = 0;         // max_position_embeddings / n_positions / context_length; 0: unknown
  int64_t pad_token_id = -1;
  std::vector<int64_t> eos_token_ids; // generation stops at any of these
  // generation_config.json's sampling defaults (what Hugging Face's generate() uses when not told).
  bool do_sample = false;
  float temperature = 1.0f, top_p = 1.0f, repetition_penalty = 1.0f;
  int top_k = 0;                      // 0: off (HF's own default, 50, applies only when the file says so)
};

ModelConfig read_model_config(const std::string& model_dir);

}  // namespace tern::llm
