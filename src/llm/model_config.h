// What the LLM layer needs from a model folder's JSON files: config.json (Hugging Face),
// generation_config.json, and genai_config.json (onnxruntime-genai). Missing files leave defaults.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tern::llm {

// The most positions tern accepts for a context or a window (16M tokens, above every released model's
// context): config values past it are refused as implausible before anything is sized by them.
constexpr int64_t kMaxContextTokens = int64_t{1} << 24;
// The window a decoder gets when none is asked for: the model's context, but at most this many positions
// (every common model's context up to Llama 3's and Gemma 3's 131,072), so that a config claiming 10^6 or
// 10^7 positions does not cost RoPE tables of that length before any run; past it the window slides.
constexpr int64_t kDefaultMaxWindow = int64_t{1} << 17;
// The largest vocabulary a config may declare (the largest released ones hold 262,144 tokens).
constexpr int64_t kMaxVocabulary = int64_t{1} << 24;

struct ModelConfig {
  std::string model_type;  // "llama", "gpt2", … ("" when unknown)
  int64_t vocab_size = 0;
  int64_t context_length = 0;  // max_position_embeddings / n_positions / context_length; 0: unknown
  int64_t pad_token_id = -1;
  std::vector<int64_t> eos_token_ids;  // generation stops at any of these
  // generation_config.json's sampling defaults (what Hugging Face's generate() uses when not told).
  bool do_sample = false;
  bool sampling_said = false;  // the file has do_sample: it says greedy or sampling (llm::sampling_options)
  float temperature = 1.0f, top_p = 1.0f, repetition_penalty = 1.0f;
  int top_k = 0;  // 0: off (HF's own default, 50, applies only when the file says so)
};

// Fails naming the file and field when a value is not an integer or is implausible (a context past
// kMaxContextTokens, a vocabulary past kMaxVocabulary, negative ids).
ModelConfig read_model_config(const std::string& model_dir);

}  // namespace tern::llm
