// tern serve's insides, shared by its files: server.cpp (loading, limits, lifecycle), completions.cpp (a completion's
// way from request to tokens to answer), routes.cpp (HTTP: routes, bodies, keys, CORS, embeddings). The scheduler is
// llm::RequestQueue, the counters tools/serve/metrics.
#pragma once
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>

#include "llm/chat_template.h"
#include "llm/continuous_batch.h"
#include "llm/embedder.h"
#include "llm/openai_api.h"
#include "llm/request_queue.h"
#include "llm/tokenizer.h"
#include "tools/serve/connection_threads.h"
#include "tools/serve/metrics.h"
#include "tools/serve/server.h"

namespace tern::serve {

using namespace tern::openai;  // (the API's requests and replies: llm/openai_api.h)

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// One request's exchange between its HTTP thread and the scheduler: per choice, the text ready to send
// and how it ended. Every member is guarded by `mu`.
struct Exchange {
  struct ChoiceState : ChoiceText {            // (its text, stop strings, finish reason and tokens: openai_api.h)
    std::vector<TokenLogprob> ready_logprobs;  // (logprobs asked) the tokens' since the last chunk, or all of them
    size_t sent_bytes = 0;                     // text sent so far, the next logprobs' text_offset (stream)
    std::string echo;                          // echo: the prompt, sent before the completion
    Clock::time_point last_token;
    bool done = false;
    using ChoiceText::ChoiceText;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<ChoiceState> choices;
  Clock::time_point start = Clock::now(), deadline;
  bool cancelled = false;  // the client went away
  bool timed_out = false;
  std::string error;  // a run failed, or the request was refused at admission (then `refused` is its answer)
  std::optional<ApiError> refused;
  // (under mu) The answer when `error` is set.
  ApiError failure(bool hard_stop) const { return refused ? *refused : ApiError(hard_stop ? 503 : 500, error, "", "server_error"); }
  bool all_done() const {
    for (const auto& c : choices)
      if (!c.done) return false;
    return true;
  }
  // (under mu) True once the client went away or the deadline passed (then timed_out): its sequences
  // stop at their next token, or leave the queue before they take a row.
  bool expired(Clock::time_point now) {
    if (!cancelled && !all_done() && now > deadline) timed_out = true;
    return cancelled || timed_out;
  }
};

inline int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Server::Impl {
  ServerOptions opt;
  std::string model_name;
  llm::ModelConfig cfg;
  std::unique_ptr<Session> session;
  std::unique_ptr<llm::Generator> gen;
  std::unique_ptr<llm::Tokenizer> tok;
  // Every token's bytes for json_object's and json_schema's constraint: made at the first such request (a decode per token), then shared.
  std::once_flag json_vocabulary_made;
  std::shared_ptr<const llm::JsonVocabulary> json_vocabulary;
  llm::ChatTemplate chat_template;
  std::vector<int64_t> chat_turn_ends;  // (its turn-end tokens: chat completions stop at them)
  int64_t context = 0;                  // the most tokens a prompt plus its completion may hold
  // --draft-model's session and its DraftModel (a ring row for each of the batch's), and every row's speculation
  // (before the batcher: they outlive its rows).
  std::unique_ptr<Session> draft_session;
  std::unique_ptr<llm::DraftModel> draft;
  llm::SpeculationOptions speculation;
  std::unique_ptr<llm::ContinuousBatcher> batcher;  // (null, as session, gen and tok, when --model is an encoder)
  std::unique_ptr<llm::Embedder> embedder;          // /v1/embeddings (null: none)
  std::string embedding_model_name;
  // One embedding batch at a time: a batch of 32 inputs of MiniLM's 256 tokens holds ~100 MB of attention scores,
  // and every HTTP thread running one at once could hold that many times it; the runs use every core anyway.
  std::mutex embed_mu;
  size_t most_input_bytes = 0;  // an embedding input of more text than this cannot fit the encoder's max_tokens
  httplib::Server http;
  int listen_socket = -1;

  // The scheduler (llm/request_queue.h): requests wait there for rows. Null, as batcher, for an embeddings server.
  std::unique_ptr<llm::RequestQueue> queue;
  std::atomic<bool> stopping{false};  // stop() came: new requests get 503; those in get the grace period
  int64_t max_prompt = 0;             // the most prompt tokens a request may have (--max-prompt-tokens, at most the context)
  size_t most_prompt_bytes = 0;       // more prompt text than this cannot fit max_prompt tokens (known unencoded)
  // A body past this cannot hold a prompt that fits (JSON spells a byte in at most 6: "\u0001"), with 64 KB for
  // the other fields: refused (413) before it is read, as a body past --max-body. Read, parsed, then refused, ten
  // 2 MB prompts a second beside decoding rows made their p99 latency 3.5x the idle server's (tests/serve/soak.py).
  size_t most_body_bytes = 0;

  Metrics metrics;  // (/metrics; its gauges are the queue's)

  explicit Impl(const ServerOptions& o);

  // More text than this cannot encode to `tokens` tokens or fewer (x2: a normalizer may shorten text, NFKC's
  // ligatures by a third), known before encoding it.
  static size_t most_text_bytes(int64_t tokens, const llm::Tokenizer& t);

  void reply_error(httplib::Response& res, const std::string& endpoint, const ApiError& e);

  // The grace period is over (or a second stop came): everything still running ends now.
  bool hard_stopped() const { return queue && queue->stopped_hard(); }

  // Tokenizes and checks a request, queues its choices and returns their exchange; throws ApiError.
  // Cheap checks come first — a full queue, a text no context could hold — so that a burst of requests or a
  // megabyte of text costs no tokenization (issue 53: 100 KB words were tokenized, then refused for length).
  //
  // The deadline starts now and covers tokenization too: the encoder asks between words and within long ones.
  std::shared_ptr<Exchange> submit(const CompletionRequest& r, int64_t& prompt_len);
  size_t body_cap() const { return std::min(opt.max_body_bytes, most_body_bytes); }
  // A request refused for its body (past the cap, cut short, to a route that takes none) or by httplib itself
  // (the error handler): one JSON error, a 413 counted by the limit it met.
  void refuse_body(httplib::Response& res, int status, const std::string& message);
  std::string body_too_large() const;
  // The prompt-length refusal: the model's context (OpenAI's code for it) or this server's own limit.
  ApiError prompt_too_long(const std::string& what, bool chat) const;
  // The queue's answer as the API's: a 429 when it cannot take the sequences, a 503 once stopping.
  void admit_or_throw(llm::RequestQueue::Admission a) const;
  // A weights file of a served model that changed under its mapping (truncated or written over: core/mapped_file.h):
  // every run on it fails, so requests are refused at once and /health says why, the server alive to say so.
  std::string changed_model_file() const;
  void refuse_if_model_changed() const;
  static ApiError shutting_down();

  // (the scheduler's thread) Each token's text decoded alone, outside the exchange's lock.
  void on_logprobs(Exchange& ex, size_t i, const llm::TokenLogprobs& lp);

  bool on_token(Exchange& ex, size_t i, int64_t token);

  void on_finish(Exchange& ex, size_t i, llm::FinishReason why);

  void complete(const httplib::Request& req, httplib::Response& res, bool chat);

  static constexpr size_t kMaxEmbeddingInputs = 2048;  // inputs a request may hold (OpenAI's limit)

  // /v1/embeddings on this HTTP thread: tokenized, checked against the encoder's max_tokens (refused, never
  // truncated), run in padded batches, pooled.
  void embeddings_route(const httplib::Request& req, httplib::Response& res, bool) { embeddings(req, res); }
  void embeddings(const httplib::Request& req, httplib::Response& res);

  // The Access-Control-Allow-Origin a response to this request carries ("" : none): "*", or the request's Origin when
  // --cors-origin lists it.
  std::string allowed_origin(const httplib::Request& req) const;

  // The models /v1/models lists: the decoder (unless the server serves embeddings only), the embedding model.
  json model_objects() const;

  void routes();
};

}  // namespace tern::serve
