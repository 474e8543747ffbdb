// Text generation over a decoder graph: prefill the prompts, then one token per step with the KV cache
// (or, with use_cache = false, the whole sequence every step). Batches are left-padded with an
// attention mask, and position_ids = cumsum(mask) − 1 with padding positions set to 1, as Hugging Face does.
#pragma once
#include <functional>
#include <memory>

#include "llm/decoder_io.h"
#include "llm/model_config.h"
#include "llm/sampler.h"

namespace tern::llm {

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  bool use_cache = true;
  std::vector<int64_t> eos_token_ids;  // stop a sequence at any of these (kept in its output)
};

struct GenerateResult {
  std::vector<std::vector<int64_t>> tokens;  // per sequence: prompt then generated ids, no padding
  double prefill_ms = 0, decode_ms = 0;
  int64_t prompt_tokens = 0, decode_steps = 0;
  Tensor prefill_logits;  // [batch, vocab] float32: the last position of the first run
};

class Generator {
 public:
  Generator(Session& session, ModelConfig config);
  const DecoderIO& io() const { return io_; }

  // `on_token(sequence, token)` sees each new token as it is chosen; returning false ends that
  // sequence (stop strings are checked this way, by whoever holds the text).
  GenerateResult generate(const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options,
                          const std::function<bool(size_t, int64_t)>& on_token = {});

 private:
  Tensor ids_tensor(const std::vector<int64_t>& values, Shape shape) const;
  Session& session_;
  ModelConfig config_;
  DecoderIO io_;
};

}  // namespace tern::llm
