// Speculative decoding with a draft model: a smaller model over the same vocabulary proposes the tokens it would
// choose greedily, and the target checks them all in one run (Generator::generate, llm/speculation.h). A draft that
// is a function of the text so far is a point mass, so the sampler's rejection rule (Sampler::next with a draft)
// keeps the target's distribution exactly, as it does for prompt lookup.
//
// The draft's ring keeps what it fed. Each proposal first rolls the ring back to the longest prefix it shares with
// the sequence now — what the target rejected goes, what it accepted stays — so a step feeds the draft only the
// tokens it has not seen: the target's last choice, then one run per draft.
#pragma once
#include "llm/generator.h"

namespace tern::llm {

class Tokenizer;

class DraftModel {
 public:
  // `session`: the draft's decoder, on the ring-buffer cache (refused otherwise, naming why); `target_vocab`: the
  // target's vocabulary size (0: unknown) — a draft token past it is never proposed (a padded vocabulary's tail).
  DraftModel(Session& session, ModelConfig config, int64_t target_vocab);
  // How many tokens a sequence may hold with its drafts before the draft's smallest ring would slide: only an
  // unslid ring rolls back (KvRingBuffer::keep_prefix), so the generator drafts within it.
  int64_t window() const { return gen_.io().ring_window; }
  // Up to max_drafts tokens the draft model greedily continues `history` with (fewer where one would be past the
  // target's vocabulary or the window; none when `history` holds a token past its own). `drafts` is overwritten.
  void propose(const std::vector<int64_t>& history, int64_t max_drafts, std::vector<int64_t>& drafts);
  // Feeds all of `history` but its last token, as the model's prefill does for the prompt — so the first proposal
  // feeds one token, and a prompt's time is counted as the prompt's.
  void prefill(const std::vector<int64_t>& history);

 private:
  // Rolls the ring back to its longest prefix shared with history[0, upto) — short of upto itself — and feeds the
  // rest; the logits at history[upto − 1], valid until the next run.
  const Tensor* feed(const std::vector<int64_t>& history, int64_t upto);
  // Every token within its vocabulary, and fewer than its window.
  bool readable(const std::vector<int64_t>& history) const;
  Generator gen_;
  int64_t target_vocab_, vocab_;
  std::vector<int64_t> held_;  // the tokens the draft's ring holds
};

// Fails naming both folders unless the two tokenizers read every token id as the same text: a draft proposes ids,
// and the target must mean by each the text the draft meant.
void check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft, const std::string& target_dir, const std::string& draft_dir);

}  // namespace tern::llm
