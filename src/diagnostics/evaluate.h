// Perplexity of a text under a decoder, computed by the runtime itself: the token ids are cut into windows of at
// most `context` tokens, each run from an empty cache (Generator::score: in one run, or `chunk` positions a run —
// on the ring, each run reads the keys and values as the ring stores them), and every next-token prediction
// inside a window is scored — the first token of each window has no prediction.
#pragma once
#include <vector>

#include "llm/generator.h"

namespace tern::llm {

struct Perplexity {
  int64_t predictions = 0;  // tokens scored
  double mean_nll = 0;      // nats per token
  double perplexity() const;
};

// Needs a graph that gives logits for every position a run asks for (DecoderIO::logits_positions on the ring).
// `second_half`: score as llama.cpp's llama-perplexity does — whole windows only, and in each the
// predictions made from its second half (every one of them sees at least context/2 tokens); with `bos` >= 0
// (a tokenizer that adds one) each window's first token is that BOS, as llama-perplexity makes it.
// `progress`: a step per window.
Perplexity perplexity(Generator& generator, const std::vector<int64_t>& ids, int64_t context, bool second_half = false, int64_t bos = -1,
                      const Progress& progress = {}, int64_t chunk = 0);

}  // namespace tern::llm
