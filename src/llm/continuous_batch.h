// Continuous batching: a fixed number of rows over the session's ring-buffer cache, which requests join
// and leave between runs. Every run feeds only the active rows (SequenceState::set_batch_rows: idle rows cost
// nothing), each either the next chunk of its prompt (at most `prefill_chunk` tokens) or the one token it
// chose last, so a new prompt never stalls the others for more than a chunk; a finished row is emptied
// (SequenceState::reset_row, on the generator's sequence) and taken by the next request.
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

#include "llm/generator.h"

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
  std::function<void(FinishReason)> on_finish;
  // Asked before each run while the prompt is being fed (may be empty): true ends the sequence (FinishReason::Stop)
  // — its client left or its deadline passed — so a long prompt stops between its chunks instead of after its whole
  // prefill. (Once it decodes, on_token's answer ends it.)
  std::function<bool()> cancelled;
};

class ContinuousBatcher {
 public:
  // `rows` sequences at once (the ring's batch); prefill_chunk 0 feeds a prompt whole.
  ContinuousBatcher(Session& session, Generator& generator, int64_t rows, int64_t prefill_chunk);
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
  int64_t free_rows() const { return rows() - active(); }
  // One run over the active rows, calling their on_token / on_finish. False when no row was active.
  // When the run throws, every active row ends (FinishReason::Error) and the exception propagates.
  bool step();
  // Ends every active row with FinishReason::Error (a server shutting down).
  void end_all();

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
  };
  void finish(size_t row, FinishReason why);
  // Samples row `row`'s next token from `logits`, hands it on and ends the row when it is done.
  void take_token(size_t row, const float* logits, int64_t vocab);
  Session& session_;
  Generator& generator_;
  int64_t prefill_chunk_;
  std::vector<Row> rows_;
  // Per run, for the active rows only (kept to allocate nothing in steady decoding).
  std::vector<std::vector<int64_t>> new_tokens_;
  std::vector<int64_t> held_, ring_rows_;
  std::vector<int64_t> top_ids_;  // token_logprobs' scratch
};

}  // namespace tern::llm
