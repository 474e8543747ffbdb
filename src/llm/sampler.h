// Picks the next token from a row of logits: greedy, or sampling with temperature, top-k, top-p,
// min-p, a repetition penalty (Hugging Face semantics) and frequency / presence penalties (OpenAI's), from a
// seeded generator.
#pragma once
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace tern::llm {

struct SamplingOptions {
  bool greedy = true;
  float temperature = 1.0f;
  int top_k = 0;                    // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off
  // OpenAI's: a token's logit less frequency_penalty times its count in the history, less presence_penalty once it
  // is there at all (0: off; -2 to 2).
  float frequency_penalty = 0.0f, presence_penalty = 0.0f;
  uint64_t seed = 0;
};

class Sampler {
 public:
  // Fails naming the first option outside its range (temperature >= 0, top_k >= 0, top_p in (0, 1],
  // min_p in [0, 1], repetition_penalty > 0): the one check, whoever sets them (CLI, chat, API callers).
  explicit Sampler(SamplingOptions o);
  // `logits` has one score per vocabulary entry (n); `history` holds the tokens the penalty applies to.
  // Allocates nothing once its scratch has grown to the vocabulary. `draft` >= 0: a token proposed for this
  // position (speculative decoding), taken with its probability p(draft), else one drawn from p without it — the
  // rejection rule for a proposal that is one token for sure, so the token's distribution is p's all the same.
  int64_t next(const float* logits, int64_t n, const std::vector<int64_t>& history, int64_t draft = -1);

 private:
  SamplingOptions o_;
  std::mt19937_64 rng_;
  std::vector<float> scores_;   // the logits after penalty and temperature
  std::vector<int64_t> order_;  // candidates, best first
  std::vector<double> p_;       // their probabilities
  std::vector<char> seen_;      // repetition penalty: tokens already penalized
  std::vector<int32_t> count_;  // frequency / presence penalties: each token's count in the history
};

// Index of the largest value; the first one on ties.
int64_t argmax(const float* v, int64_t n);

// The indices of the k largest of v[0..n), largest first (ties: lower index first), in `ids` (its storage
// reused across calls).
void top_k_indices(const float* v, int64_t n, int64_t k, std::vector<int64_t>& ids);

// A chosen token's log-probability under softmax(logits) — the model's own distribution, before temperature,
// penalties and truncation (what OpenAI's `logprobs` and llama-server report) — and the `top` most likely
// tokens with theirs, most likely first.
struct TokenLogprobs {
  int64_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int64_t, float>> top;
};
// `scratch` is top_k_indices' storage, kept by the caller across tokens.
TokenLogprobs token_logprobs(const float* logits, int64_t n, int64_t token, int64_t top, std::vector<int64_t>& scratch);

}  // namespace tern::llm
