// Continuous batching: a fixed number of rows over the session's ring-buffer cache, which requests join
// and leave between runs. Every run feeds only the active rows (SequenceState::set_batch_rows: idle rows cost
// nothing), each either the next chunk of its prompt (at most `prefill_chunk` tokens) or the one token it
// chose last, so a new prompt never stalls the others for more than a chunk; a finished row is emptied
// (SequenceState::reset_row, on the generator's sequence) and taken by the next request.
//
// Prefix reuse: a finished row keeps its cache (keys are stored before RoPE, so they need no re-rotation), and
// a request whose prompt begins with tokens an idle row holds takes that row and feeds only the rest
// (SequenceState::keep_prefix) — chat clients resend the system prompt and the history every turn. Idle rows are
// the cache: no memory beyond the rows', the least recently used given to a request that matches none.
//
// Batch invariance: rows are left-padded to the run's longest and padding is never cached, so a row's
// arithmetic — its prompt chunks, then one token a run — is the same alone or beside seven others, as
// long as the kernels' per-row results do not depend on how many rows a product has
// (tests/test_continuous_batch.cpp checks greedy and sampled tokens bitwise). One thread calls it (tern serve's
// scheduler); callbacks run on that thread.
#pragma once
#include <functional>
#include <optional>
#include <vector>

#include "llm/draft_model.h"
#include "llm/generator.h"
#include "llm/json_constraint.h"

namespace tern::llm {

// max_new_tokens reached; an EOS token or on_token said stop; the run failed or the batch was ended (end_all)
enum class FinishReason { Length, Stop, Error };

struct SequenceRequest {
  std::vector<int64_t> prompt;
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  std::vector<int64_t> eos_token_ids;  // kept in the output, then the sequence ends
  // Sees each new token; false ends the sequence there (a stop string matched, the client went away).
  std::function<bool(int64_t token)> on_token;
  // When set, sees each new token's log-probability and its `top_logprobs` most likely alternatives, just before
  // on_token sees the token (an API request's logprobs).
  std::function<void(const TokenLogprobs&)> on_logprobs;
  int64_t top_logprobs = 0;
  // When set, masks each step's logits to the tokens that keep the text a JSON object's beginning (the logprobs
  // stay the model's own); the sequence ends once the object is whole (response_format json_object).
  std::shared_ptr<JsonConstraint> constraint;
  std::function<void(FinishReason)> on_finish;
  // Asked before each run while the prompt is being fed (may be empty): true ends the sequence (FinishReason::Stop)
  // — its client left or its deadline passed — so a long prompt stops between its chunks instead of after its whole
  // prefill. (Once it decodes, on_token's answer ends it.)
  std::function<bool()> cancelled;
  // Speculative decoding (llm/speculation.h): each run feeds the row's last token and its drafts; the ring keeps
  // what was taken.
  SpeculationOptions speculation;
};

class ContinuousBatcher {
 public:
  // `rows` sequences at once (the ring's batch); prefill_chunk 0 feeds a prompt whole; reuse_prefixes false: every
  // prompt is fed whole, idle rows keep nothing.
  ContinuousBatcher(Session& session, Generator& generator, int64_t rows, int64_t prefill_chunk, bool reuse_prefixes = true);
  int64_t rows() const { return static_cast<int64_t>(rows_.size()); }
  int64_t active() const;
  // Ring tokens held by the active rows (the KV slots in use, per layer).
  int64_t held_tokens() const;
  // Checks the request as Generator::generate would (throws naming what is wrong) and gives it a free
  // row, returned; fails when every row is taken. A request for no new tokens finishes at once (-1).
  int64_t add(SequenceRequest request);
  // Sequences of one prompt (an API request's n choices), a row each: the first feeds the prompt, the
  // others copy its cache (SequenceState::copy_row) and its last logits once it is in, then each samples on its
  // own. Needs as many free rows; returns them.
  std::vector<int64_t> add_group(std::vector<SequenceRequest> group);
  // The rings at the group's last token must fit the memory caps (Generator::check_cache_memory over every row:
  // the rings grow for all rows to the longest one's length), else MemoryLimitError naming the sizes — so a
  // request that would pass the cap is refused alone, before it runs, instead of failing a step and with it every
  // active row. add_group checks it first.
  void check_memory(const std::vector<SequenceRequest>& group) const;
  int64_t free_rows() const { return rows() - active(); }
  // One run over the active rows, calling their on_token / on_finish. False when no row was active.
  // When the run throws, every active row ends (FinishReason::Error) and the exception propagates.
  bool step();
  // Ends every active row with FinishReason::Error (a server shutting down).
  void end_all();
  // Prefix reuse so far: prompts that found an idle row holding their beginning (hits) or none (misses), and the
  // prompt tokens not fed because of it.
  int64_t prefix_hits() const { return prefix_hits_; }
  int64_t prefix_misses() const { return prefix_misses_; }
  int64_t reused_tokens() const { return reused_tokens_; }
  // Speculation so far: tokens proposed, and those the rows' own choices confirmed.
  int64_t drafted_tokens() const { return drafted_tokens_; }
  int64_t accepted_tokens() const { return accepted_tokens_; }

 private:
  struct Row {
    bool active = false;
    SequenceRequest request;
    std::optional<Sampler> sampler;
    std::vector<int64_t> tokens;  // prompt, then what was generated
    int64_t fed = 0;              // tokens the ring row has been fed
    int64_t generated = 0;
    std::vector<size_t> followers;  // rows waiting to copy this one's prompt
    bool following = false;         // waiting for a leader's prompt: not fed
    bool holds = false;             // idle, its cache still holding tokens[0, fed) (prefix reuse)
    uint64_t last_used = 0;         // when it last finished (least recently used: taken first)
    std::vector<int64_t> drafts;    // proposed for this run, fed after its last token
  };
  // A free row for a new sequence, and how many of `prompt`'s tokens its cache already holds (0 without a prompt).
  size_t pick_row(const std::vector<int64_t>* prompt, int64_t& reuse) const;
  void finish(size_t row, FinishReason why);
  // Samples row `row`'s next token from `logits` (`draft` >= 0: speculation's proposal there, Sampler::next's rule)
  // into `token` and hands it on; the reason the row ends with it, if it does (finish() is the caller's).
  std::optional<FinishReason> choose(size_t row, const float* logits, int64_t vocab, int64_t draft, int64_t& token);
  // choose() with no draft, the row finished when it ends.
  void take_token(size_t row, const float* logits, int64_t vocab);
  Session& session_;
  Generator& generator_;
  int64_t prefill_chunk_;
  bool reuse_prefixes_;
  uint64_t clock_ = 0;  // finishes so far (Row::last_used)
  int64_t prefix_hits_ = 0, prefix_misses_ = 0, reused_tokens_ = 0;
  int64_t drafted_tokens_ = 0, accepted_tokens_ = 0;
  std::vector<Row> rows_;
  // Per run, for the active rows only (kept to allocate nothing in steady decoding).
  std::vector<std::vector<int64_t>> new_tokens_;
  std::vector<DraftModel::Proposal> proposals_;  // (a step's, for a draft model)
  std::vector<int64_t> held_, ring_rows_;
  std::vector<int64_t> top_ids_;  // token_logprobs' scratch
  std::vector<float> masked_;     // a constrained row's logits, masked
};

}  // namespace tern::llm
