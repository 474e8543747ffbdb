// Beam search with Hugging Face's semantics, one step at a time: generate() runs it to the end when
// num_beams > 1; the C API's tern_beam_search_* (and so the Python package's GeneratorParams(num_beams=…)) step it.
//
// num_beams beams per prompt; all but the first start at −1e9, so the first step does not pick duplicates. Each
// step scores beam + log-softmax for every token, takes the best 2·num_beams candidates, turns candidates ending in
// an end token (among the first num_beams) into finished hypotheses and keeps the best num_beams others running. A
// hypothesis scores sum_logprobs / generated_length^length_penalty. A prompt is done when num_beams hypotheses
// exist and (early_stopping, or) no running beam can still beat the worst of them.
//
// On a graph's own cache the beams are batch rows fed together, reordered after each step (KvCache::reorder). On
// the ring-buffer cache a beam is a ring row: the prefill feeds one row per prompt, a step feeds each running beam
// its last token (Generator::run_rows), and a beam keeps its parent's row when it is the parent's first child —
// only a second child copies the row (SequenceState::copy_row), into a row no beam continues.
#pragma once
#include <optional>

#include "llm/generator.h"

namespace tern::llm {

class BeamSearch {
 public:
  using Rows = std::vector<std::vector<int64_t>>;
  // Refuses the request as generate() does (Generator::check_request, the memory caps for num_beams rows a
  // prompt) and empties the generator's caches: the search owns them until it ends.
  BeamSearch(Generator& generator, Rows prompts, const GenerateOptions& options);
  // One token on every running beam (the first step also feeds the prompts). Nothing once done().
  void step();
  // Every prompt is done, or max_new_tokens steps have run.
  bool done() const;
  int64_t steps() const { return steps_; }
  // Each beam's last token, num_beams a prompt in prompt order, the best running beam first (empty before the
  // first step; a done prompt's beams keep theirs).
  const std::vector<int64_t>& last_tokens() const { return last_; }
  // Per prompt its `count` best hypotheses (1 ≤ count ≤ num_beams), best first, each the prompt then its
  // generated tokens: prompt b's i-th is entry b·count + i. Before done(), the running beams compete as if they
  // ended now — as they do at the end.
  Rows best(int64_t count) const;
  // generate()'s answer: best(1) with the timings.
  GenerateResult result() const;

 private:
  struct Hypothesis {
    double score;
    std::vector<int64_t> tokens;  // generated tokens, the end token included when it ended the hypothesis
  };
  struct Candidate {  // beam k's score after token v
    double s;
    int64_t k, v;
  };
  // The logits of every beam this step, [fed rows, V]; logits_row_[beam] is its row.
  const Tensor& forward();
  // The ring rows of the beams that continue `from[beam]`: the first child keeps its parent's row.
  void move_ring_rows(const std::vector<int64_t>& from);
  void add_hypothesis(std::vector<Hypothesis>& into, double score, std::vector<int64_t> tokens) const;

  Generator& g_;
  Rows prompts_;
  GenerateOptions opt_;
  int64_t B_, nb_;
  bool ring_, cached_;
  int64_t pad_;
  // A graph cache's rows: the left-padded sequences fed whole (the cache holds what it holds of them).
  Rows seq_, mask_;
  std::optional<KvCache> cache_;
  // The ring: beam r's row; the prefill's logits, [prompts, V] (every beam of a prompt starts from them).
  std::vector<int64_t> ring_row_;
  Tensor prefill_;
  std::vector<int64_t> logits_row_;
  std::vector<double> score_;
  Rows generated_;
  std::vector<std::vector<Hypothesis>> hypotheses_;
  std::vector<char> prompt_done_;
  std::vector<int64_t> last_;
  std::vector<Candidate> candidates_;  // a prompt's num_beams × V candidates, kept between steps (no allocation a step)
  int64_t steps_ = 0;
  GenerateResult timing_;
};

}  // namespace tern::llm
