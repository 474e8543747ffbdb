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
  // target's vocabulary size (0: unknown) — a draft token past it is never proposed (a padded vocabulary's tail);
  // `rows`: the sequences it drafts for at once (a continuous batch's rows; each a row of its ring).
  DraftModel(Session& session, ModelConfig config, int64_t target_vocab, int64_t rows = 1);
  int64_t rows() const { return static_cast<int64_t>(held_.size()); }
  // How many tokens a sequence may hold with its drafts before the draft's smallest ring would slide: only an
  // unslid ring rolls back (KvRingBuffer::keep_prefix), so the generator drafts within it.
  int64_t window() const { return gen_.io().ring_window; }

  // One row's proposal: up to max_drafts tokens the draft model greedily continues `history` with, into `drafts`
  // (overwritten; fewer where one would be past the target's vocabulary or the window, none when `history` holds a
  // token past the draft's own).
  struct Proposal {
    int64_t row = 0;
    const std::vector<int64_t>* history = nullptr;
    int64_t max_drafts = 0;
    std::vector<int64_t>* drafts = nullptr;
  };
  // Every proposal's drafts, the rows batched: a run feeds each row what its ring lacks (a long stretch first in
  // prefill-sized runs), then one run a draft feeds each row still drafting its last draft.
  void propose(const std::vector<Proposal>& proposals);
  // Row 0's (Generator::generate).
  void propose(const std::vector<int64_t>& history, int64_t max_drafts, std::vector<int64_t>& drafts);
  // Feeds row 0 all of `history` but its last token, as the model's prefill does for the prompt — so the first
  // proposal feeds one token, and a prompt's time is counted as the prompt's.
  void prefill(const std::vector<int64_t>& history);

 private:
  // Rolls row `row` back to its longest prefix shared with history[0, upto), short of upto itself (the last token's
  // logits are what drafting starts from); returns how many tokens it keeps.
  int64_t roll_back(int64_t row, const std::vector<int64_t>& history, int64_t upto);
  // Feeds each row which[i] tokens[i] (at least one; emptied of all but the last run's), after what it holds, in
  // runs of at most a prefill chunk; the logits of each row's last token, [rows, vocab], valid until the next run.
  const Tensor& feed(const std::vector<int64_t>& which, std::vector<std::vector<int64_t>>& tokens);
  // Every token within its vocabulary, and fewer than its window.
  bool readable(const std::vector<int64_t>& history) const;
  Generator gen_;
  int64_t target_vocab_, vocab_;
  std::vector<std::vector<int64_t>> held_;  // per row: the tokens the draft's ring holds
  // feed()'s scratch: a run's rows, the tokens each feeds, what each row holds before it; propose()'s: the rows
  // drafting, their limits, their drafts, what each feeds next — kept so a decode step allocates nothing here.
  std::vector<int64_t> run_rows_, run_held_, drafting_, limits_;
  std::vector<std::vector<int64_t>> run_tokens_, pending_;
  std::vector<std::vector<int64_t>*> outs_;
  std::vector<Proposal> one_;
};

// Fails naming both folders unless the draft can speak the model's vocabulary — a draft proposes ids, and the model
// must mean by each the text the draft meant: with both tokenizers, every id read as the same text; without one (a
// caller of token ids only), the configs' vocabulary sizes equal.
void check_same_vocabulary(const Tokenizer* target, const Tokenizer* draft, const ModelConfig& target_config,
                           const ModelConfig& draft_config, const std::string& target_dir, const std::string& draft_dir);

}  // namespace tern::llm
