// Speculative decoding: a step proposes a few tokens and one run over the weights checks them all
// (Generator::generate); each accepted draft is a token for which the weights were not streamed again. The drafts
// come from prompt lookup — the tokens that followed the newest earlier occurrence of the sequence's last few tokens:
// text that quotes, edits or summarizes its prompt repeats it — or from a draft model (llm/draft_model.h).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace tern::llm {

class DraftModel;

struct SpeculationOptions {
  // Tokens proposed a step at most; 0: no speculation. 3 by default: a verification run of 4 positions stays on
  // the kernels a decode step runs (kernels/cpu/gemv.h's kGemvMaxRows), so its logits are plain decoding's.
  int64_t drafts = 0;
  // The suffix looked up: its last this many tokens at least (ngram_draft prefers the occurrence matching more). Shorter matches draft
  // worse than they cost — SmolLM2-135M, 2 threads, bench/speculation.sh (3 rounds): falling back to 1 token, a copying prompt 1.42x and an
  // open one 0.70x; to 2, 1.33x / 0.86x; 3 alone, 1.43x / 0.90x.
  int64_t ngram = 3;
  // Set: the drafts are this model's greedy continuation instead (its caller's; a ring row per sequence).
  DraftModel* draft = nullptr;
};

// "ngram" or "ngram:N" (N drafts a step, 1 to 16; the CLI's --speculate and serve's "speculate"); "draft" or
// "draft:N", the drafts `draft`'s (--draft-model; "" means "draft" when one is given); "" or "off": none. Fails
// naming the text otherwise.
SpeculationOptions parse_speculation(const std::string& text, DraftModel* draft = nullptr);

// How many drafts a step may feed: the options' count, less than the `tokens_left` a sequence may still make, and
// within a ring window of `window` slots (the model's; with a draft model, the smaller of its and the draft's) once
// its `held` tokens and this step's last token are in — a slid window cannot take rejected drafts back
// (KvRingBuffer::keep_prefix). 0: a plain step.
int64_t draft_room(const SpeculationOptions& o, int64_t tokens_left, int64_t held, int64_t window);

// Up to max_drafts tokens that followed an earlier occurrence of the last `ngram` tokens of `history` — of those, the
// one whose match with the text before the suffix runs longest, the newest on a tie; empty when they did not occur
// before. `drafts` is overwritten. Against the newest occurrence alone, SmolLM2-135M Q4_1, bench/speculation.sh, 2
// threads, Zen 5: a copying prompt 1.81x → 1.89x plain decode, an open one 0.96x → 1.17x (39 → 67 drafts, 4 → 49
// accepted: a small model's greedy story repeats its own sentences, which the newest 3 tokens alone missed).
void ngram_draft(const std::vector<int64_t>& history, int64_t ngram, int64_t max_drafts, std::vector<int64_t>& drafts);

}  // namespace tern::llm
