// Text generation over a decoder graph: prefill the prompts, then one token per step with the KV cache
// (or, with use_cache = false, the whole sequence every step). Batches are left-padded with an
// attention mask, and position_ids = cumsum(mask) − 1 with padding positions set to 1, as Hugging Face does.
#pragma once
#include <functional>
#include <memory>

#include "llm/decoder_io.h"
#include "llm/json_constraint.h"
#include "llm/kv_cache.h"
#include "llm/model_config.h"
#include "llm/sampler.h"
#include "llm/speculation.h"

namespace tern::llm {

constexpr int64_t kAutoPrefillChunk = -1;
// SmolLM2-135M, a 2209-token prompt, this VM (Zen 3, 2 threads): 395 and 428 tok/s whole, 447 and 430 in chunks
// of 512, the same 12 greedy tokens and top-3 logits (`tern generate --prefill-chunk 0|512 --top-logits 3`).
constexpr int64_t kDefaultPrefillChunk = 512;

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  int num_beams = 1;            // > 1: beam search (Hugging Face semantics), ignores sampling
  float length_penalty = 1.0f;  // beam score = sum of log-probs / generated_length^length_penalty
  bool early_stopping = false;  // true: a prompt is done once num_beams hypotheses have ended
  int64_t min_new_tokens = 0;   // no end token among the first this many new tokens (sampling and beams)
  bool use_cache = true;
  // > 0: feed the prompt in chunks of this many tokens (needs a cache); 0: whole; kAutoPrefillChunk: chunks of
  // kDefaultPrefillChunk on the ring cache (the same logits bit for bit, a fraction of the activations: a
  // 109k-token prompt peaked at 1.39 GB whole, 72 MB in chunks of 512), whole on a graph's own cache.
  int64_t prefill_chunk = -1;
  std::vector<int64_t> eos_token_ids;  // stop a sequence at any of these (kept in its output)
  // One sequence: when the tokens the last resuming generate() left in the cache begin this prompt,
  // continue from that cache — a chat's earlier turns are not fed again (`tern chat`) — and keep this
  // one's for the next. Else (or false) a fresh cache.
  bool resume = false;
  // > 0: GenerateResult::top_logits keeps each step's this many highest logits per sequence — where two
  // runtimes' greedy tokens part, it shows whether the step was a near-tie.
  int64_t top_logits = 0;
  // One sequence, sampled or greedy: only the tokens the constraint allows (a forced tool call's JSON object), and
  // the sequence ends once it is whole. The caller's per-sequence state, fed each token chosen.
  JsonConstraint* constraint = nullptr;
  // Speculative decoding (llm/speculation.h): one sequence on the ring cache, no beams; greedy tokens are plain
  // greedy's, sampled ones drawn from the same distribution (a constraint masks each checked position as it would).
  SpeculationOptions speculation;
};

struct GenerateResult {
  std::vector<std::vector<int64_t>> tokens;  // per sequence: prompt then generated ids, no padding
  double prefill_ms = 0, decode_ms = 0;
  int64_t prompt_tokens = 0, decode_steps = 0;      // prompt_tokens: positions the prefill fed (resume: the new ones)
  int64_t decode_tokens = 0;                        // new tokens per sequence after the prefill's (decode_steps unless speculating)
  int64_t drafted_tokens = 0, accepted_tokens = 0;  // speculation: tokens proposed, and those the model's own choice confirmed
  Tensor prefill_logits;                            // [batch, vocab] float32: the last position of the first run
  int64_t weight_bytes_per_token = 0;               // weights a decode step reads
  int64_t cache_bytes_per_token = 0;                // KV-cache bytes the last decode step moved
  // [sequence][step]: (token, logit), highest first (GenerateOptions::top_logits; sampling only).
  std::vector<std::vector<std::vector<std::pair<int64_t, float>>>> top_logits;
};

// Pads prompts to one length with `pad`, before each prompt (left) or, for attention that reads them so
// (DecoderIO::prompts_right_padded), after it; `mask` marks real tokens. Tokens generated later are appended to
// every row, so a right-padded row's padding stays between its prompt and its new tokens, masked: positions
// count real tokens, and the mask's sum is each row's length.
void pad_prompts(const std::vector<std::vector<int64_t>>& prompts, int64_t pad, bool right, std::vector<std::vector<int64_t>>& seq,
                 std::vector<std::vector<int64_t>>& mask);

// One generator is one sequence (or one batch of them) on a session: its ring-buffer caches live in a
// SequenceState of its own, so several generators share one session's weights, each on its own thread.
// One thread at a time per generator.
class BeamSearch;

class Generator {
 public:
  Generator(Session& session, ModelConfig config);
  const DecoderIO& io() const { return io_; }
  // The caches this generator's runs feed (continuous batching empties and copies its rows).
  SequenceState& sequence() { return *sequence_; }

  // `on_token(sequence, token)` sees each new token as it is chosen; returning false ends that
  // sequence (stop strings are checked this way, by whoever holds the text).
  GenerateResult generate(const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options,
                          const std::function<bool(size_t, int64_t)>& on_token = {});
  // What generate() refuses before running anything — an option out of range, a token id outside the
  // vocabulary, a prompt past the context — as the error it would throw; callers that print first check.
  void check_request(const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options) const;

  // Continuous batching over a ring-buffer cache (PastLayout::Internal; fails otherwise): one run in which
  // sequence i < rows.size(), ring row rows[i] of the `total_rows` the cache holds, feeds new_tokens[i]
  // (at least one; new_tokens may hold more entries, unused)
  // after the held[i] tokens its row holds. Returns each sequence's logits at its last new token,
  // [sequences, vocab] float32, valid until the next call. Sequences are left-padded to the longest and
  // padding is never cached, so each one's arithmetic is the same whatever the others feed. logits_rows > 1: each
  // sequence's last logits_rows positions (speculative steps), [sequences, logits_rows, vocab].
  const Tensor& run_rows(const std::vector<std::vector<int64_t>>& new_tokens, const std::vector<int64_t>& held,
                         const std::vector<int64_t>& rows, int64_t total_rows, int64_t logits_rows = 1);
  // One sequence fed a few tokens at a time outside a batch (the C API's step functions on a model whose
  // attention keeps the graph's own past, or none): runs the positions of `tokens` that `cache` lacks (all of
  // them without a cache) and returns the last one's logits, [1, vocab] float32, valid until the next call.
  const Tensor& extend(const std::vector<int64_t>& tokens, KvCache* cache);
  // The prompts, padded to one length (pad_prompts, io().prompts_right_padded), in one run from an empty cache (refused as generate()
  // refuses them): the graph output `output` at every position, [prompts, longest, ·], valid until the next call — a decoder's hidden state
  // for embeddings (DecoderRewrites::hidden_state_of).
  const Tensor& prefill_output(const std::vector<std::vector<int64_t>>& prompts, const std::string& output);
  // The logits of every position of one sequence `tokens`, from an empty cache, `chunk` positions a run: each
  // run's [1, n, vocab] float32 (n ≤ chunk) handed to `take(first position, logits)`. On the ring each run reads
  // the keys and values as the ring stores them (fp16, q8_0…), as decode does: `tern eval --kv-dtype` scores so.
  void score(const std::vector<int64_t>& tokens, int64_t chunk, const std::function<void(int64_t, const Tensor&)>& take);
  const ModelConfig& config() const { return config_; }
  // Before a generation of `rows` rows allocates its cache: the cache at its last token — the ring's
  // (Session::state_peak_bytes) or a graph cache's past beside the present a step writes — must fit the memory
  // caps — with the ring, together with what the prefill's runs and a decode step take for their activations
  // (forecast_activations) — else it fails (MemoryLimitError) at once naming the sizes, not part-way.
  // A continuous batch asks it for a request's longest prompt and new tokens over all its rows: a ring's slots are
  // per row, as many for each as its longest needs.
  void check_cache_memory(int64_t rows, int64_t longest, const GenerateOptions& options) const;
  // The prompt chunk options.prefill_chunk means here (kAutoPrefillChunk resolved); 0: the whole prompt.
  int64_t prefill_chunk(const GenerateOptions& options) const;
  // With the ring (the session holds the cache): what a generation's runs — the prompt's first and last chunk
  // (options.prefill_chunk), then decode steps and their step plan — take for activations from the session's pool as it is now
  // (Session::forecast_activations). Zero for a graph's own cache: its runs check their own before they start.
  ActivationForecast::Result forecast_activations(int64_t rows, int64_t longest, const GenerateOptions& options) const;
  // The runs such a generation makes, by their feeds' shapes (Session::forecast_activations takes several
  // generations' one after another); empty for a graph's own cache.
  std::vector<std::vector<std::pair<std::string, Shape>>> run_shapes(int64_t rows, int64_t longest, const GenerateOptions& options) const;

 private:
  friend class BeamSearch;  // (its steps feed the generator's caches as generate() does)
  using Rows = std::vector<std::vector<int64_t>>;
  // One forward pass over padded rows (pad_prompts; `mask` marks real tokens): feeds what `cache` lacks (all
  // positions without a cache), in runs of at most `chunk` positions when chunk > 0, and returns each row's
  // logits at its last real token, [rows, vocab] float32 (valid until the next call; copy it to keep it).
  // logits_rows > 1 (one row, a speculative step): the logits of its last logits_rows positions, [1, logits_rows, vocab].
  const Tensor& forward(const Rows& seq, const Rows& mask, KvCache* cache, int64_t chunk = 0, int64_t logits_rows = 1);
  // Runs the session on feeds_ (`rows` rows) and returns the logits per row at step_last_'s position (when it
  // holds one per row, else the last), or logits_rows > 1 of each row's last positions, [rows, logits_rows, vocab].
  const Tensor& run_feeds(int64_t rows, KvCache* cache, int64_t fed, int64_t logits_rows);
  int64_t pad_id() const;
  // The attention mask's columns for a run of `n` new tokens of `total`: only the new ones' where the ring alone reads it.
  int64_t mask_columns(int64_t n, int64_t total) const { return io_.mask_new_tokens_only ? n : total; }
  // feeds_[slot] = (name, values as a [rows, cols] ids tensor), in last step's tensor when it fits.
  void set_feed(size_t slot, const std::string& name, const std::vector<int64_t>& values, int64_t rows, int64_t cols);
  // feeds_[slot++] = a merged decoder's use_cache_branch, true (DecoderIO::use_cache_branch), and the positions whose
  // logits come back, the last logits_rows (DecoderIO::logits_positions), where the model has them.
  void set_flag_feeds(size_t& slot, int64_t logits_rows);
  Session& session_;
  std::unique_ptr<SequenceState> sequence_;
  ModelConfig config_;
  DecoderIO io_;
  // What the last resuming generate() left cached, and the tokens it holds (GenerateOptions::resume).
  std::unique_ptr<KvCache> resumable_;
  std::vector<int64_t> resumable_tokens_;
  // Per-step state kept between steps so that decoding allocates nothing: the feeds, the outputs
  // handed back to the session (a replayed step writes its logits in place) and the last logits.
  std::vector<int64_t> step_ids_, step_mask_, step_pos_;
  std::vector<int64_t> step_last_;  // per row, the last real token's index among the run's positions (-1: the last)
  std::vector<std::pair<std::string, Tensor>> feeds_;
  Outputs step_out_;
  Tensor last_;
};

}  // namespace tern::llm
