#include "tools/serve/server.h"

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

namespace tern::serve {

using namespace tern::openai;  // (the API's requests and replies: llm/openai_api.h)

namespace {
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

// Equal strings, in a time that depends on their lengths only (an API key is not guessed byte by byte from timings).
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

int64_t unix_now() { return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(); }
}  // namespace

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
  std::vector<int64_t> chat_turn_ends;              // (its turn-end tokens: chat completions stop at them)
  int64_t context = 0;                              // the most tokens a prompt plus its completion may hold
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

  explicit Impl(const ServerOptions& o) : opt(o) {
    const std::string embedding_path = llm::is_encoder_folder(o.model_path) ? o.model_path : o.embedding_model;
    if (o.decoder_embeddings && embedding_path == o.model_path)
      fail("--embeddings: the --model '", o.model_path, "' is an encoder, whose embeddings are served without it");
    if (!embedding_path.empty()) {
      if (embedding_path == o.model_path && !o.embedding_model.empty())
        fail("--embedding-model: the --model '", o.model_path, "' is an encoder itself");
      embedder = std::make_unique<llm::Embedder>(embedding_path, llm::load_session_options(o.decoder));
      embedding_model_name = embedding_path == o.model_path && !o.model_name.empty()
                                 ? o.model_name
                                 : std::filesystem::path(embedding_path).lexically_normal().filename().string();
      if (embedding_model_name.empty()) embedding_model_name = std::filesystem::path(embedding_path).parent_path().filename().string();
      // (an input of token ids is checked by count)
      most_input_bytes = most_text_bytes(embedder->max_tokens(), embedder->tokenizer());
    }
    if (embedding_path == o.model_path) {  // an embeddings server: no decoder, no scheduler
      model_name = embedding_model_name;
      most_body_bytes = std::min(o.max_body_bytes, kMaxEmbeddingInputs * 6 * most_input_bytes + 65536);
      routes();
      return;
    }
    const llm::ModelFiles files = llm::resolve_model(o.model_path, o.dtype);
    model_name = !o.model_name.empty() ? o.model_name : std::filesystem::path(files.dir).filename().string();
    cfg = llm::read_model_config(files.dir);
    SessionOptions so = llm::decoder_session_options(o.decoder, cfg, true);
    if (o.decoder_embeddings) {
      if (!o.embedding_model.empty()) fail("--embeddings and --embedding-model: /v1/embeddings serves one model; choose one");
      so.hidden_state_of = "logits";
    }
    session = std::make_unique<Session>(files.onnx, so);
    gen = std::make_unique<llm::Generator>(*session, cfg);
    tok = llm::load_tokenizer(files.dir);
    if (o.decoder_embeddings) {
      embedder = std::make_unique<llm::Embedder>(*session, cfg, *tok, o.pooling);
      embedding_model_name = model_name;
      most_input_bytes = most_text_bytes(embedder->max_tokens(), *tok);
    }
    chat_template = llm::ChatTemplate::load(files.dir);
    if (chat_template.is_fallback()) std::cerr << "tern serve: chat template: " << chat_template.origin() << "\n";
    chat_turn_ends = chat_template.turn_end_tokens(*tok);
    context = cfg.context_length > 0 ? cfg.context_length : session->options().kv_window;
    if (o.parallel < 1 || o.parallel > 256) fail("--parallel ", o.parallel, ": 1 to 256 sequences");
    if (o.queue < 0) fail("--queue ", o.queue, ": must not be negative");
    if (!(o.timeout_s > 0)) fail("--timeout ", o.timeout_s, ": must be positive seconds");
    if (!(o.grace_s >= 0)) fail("--grace ", o.grace_s, ": must not be negative");
    if (o.max_body_bytes < 1024) fail("--max-body ", o.max_body_bytes, ": at least 1024 bytes");
    if (o.max_prompt_tokens < 0 || o.max_tokens < 0) fail("--max-prompt-tokens and --max-tokens must not be negative");
    max_prompt = o.max_prompt_tokens > 0 ? std::min(o.max_prompt_tokens, context) : context;
    most_prompt_bytes = most_text_bytes(max_prompt, *tok);
    most_body_bytes = 6 * most_prompt_bytes + 65536;
    if (embedder) most_body_bytes = std::max(most_body_bytes, kMaxEmbeddingInputs * 6 * most_input_bytes + 65536);
    batcher = std::make_unique<llm::ContinuousBatcher>(*session, *gen, o.parallel, o.prefill_chunk, o.prefix_cache);
    queue = std::make_unique<llm::RequestQueue>(*batcher, o.queue);
    routes();
  }

  // More text than this cannot encode to `tokens` tokens or fewer (x2: a normalizer may shorten text, NFKC's
  // ligatures by a third), known before encoding it.
  static size_t most_text_bytes(int64_t tokens, const llm::Tokenizer& t) {
    return 2 * static_cast<size_t>(tokens) * std::max<size_t>(t.longest_token_bytes(), 1) + 4096;
  }

  void reply_error(httplib::Response& res, const std::string& endpoint, const ApiError& e) {
    if (!e.limit.empty()) metrics.count_refused(e.limit);
    res.status = e.status;
    if (e.status == 429) res.set_header("Retry-After", "1");
    res.set_content(error_body(e), "application/json");
    metrics.count_request(endpoint, e.status);
  }

  // The grace period is over (or a second stop came): everything still running ends now.
  bool hard_stopped() const { return queue && queue->stopped_hard(); }

  // Tokenizes and checks a request, queues its choices and returns their exchange; throws ApiError.
  // Cheap checks come first — a full queue, a text no context could hold — so that a burst of requests or a
  // megabyte of text costs no tokenization (issue 53: 100 KB words were tokenized, then refused for length).
  //
  // The deadline starts now and covers tokenization too: the encoder asks between words and within long ones.
  std::shared_ptr<Exchange> submit(const CompletionRequest& r, int64_t& prompt_len) {
    auto ex = std::make_shared<Exchange>();
    ex->deadline = ex->start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.timeout_s));
    const int64_t prompts = r.chat ? 1 : static_cast<int64_t>(r.prompts.size());
    admit_or_throw(queue->check(r.n * prompts));
    refuse_if_model_changed();
    if (r.n > opt.parallel) {
      ApiError e(400,
                 "'n' " + std::to_string(r.n) + " is more than the " + std::to_string(opt.parallel) +
                     " sequences this server runs at once (--parallel)",
                 "n");
      e.limit = "parallel";
      throw e;
    }
    if (r.n * prompts > opt.parallel + opt.queue) {  // (never room for them: a 400, not a 429 to retry)
      ApiError e(400,
                 std::to_string(r.n * prompts) + " sequences (n times the prompts) are more than this server holds: " +
                     std::to_string(opt.parallel) + " running (--parallel) and " + std::to_string(opt.queue) + " waiting (--queue)",
                 "n");
      e.limit = "queue";
      throw e;
    }
    size_t text_bytes = 0;
    for (const auto& p : r.prompts) text_bytes = std::max(text_bytes, p.text.size());
    for (const auto& m : r.chat_messages) text_bytes += m["content"].get_ref<const std::string&>().size();
    if (text_bytes > most_prompt_bytes)
      throw prompt_too_long(
          "the prompt's " + std::to_string(text_bytes) + " bytes are more than " + std::to_string(max_prompt) + " tokens can hold", r.chat);
    // Each prompt's tokens (text with BOS as the tokenizer adds it; token ids as they are) and the text an echo repeats.
    std::vector<std::vector<int64_t>> ids(static_cast<size_t>(prompts));
    std::vector<std::string> echoes(static_cast<size_t>(prompts));
    try {
      const llm::CancelCheck past_deadline = [&] { return hard_stopped() || Clock::now() > ex->deadline; };
      if (r.chat) ids[0] = chat_prompt(*tok, chat_template, r, past_deadline);
      for (size_t p = 0; p < r.prompts.size(); ++p) {
        const PromptInput& in = r.prompts[p];
        ids[p] = in.is_ids ? in.ids : tok->encode(in.text, true, past_deadline);
        if (r.echo) echoes[p] = in.is_ids ? tok->decode(in.ids) : in.text;
      }
    } catch (const llm::EncodeCancelled&) {
      metrics.count_cancelled(hard_stopped() ? "shutdown" : "timeout");
      if (hard_stopped()) throw ApiError(503, "the server stopped before this request's prompt was read", "", "server_error");
      throw ApiError(504, "the request ran past the server's timeout (--timeout) while its prompt was tokenized", "", "timeout");
    }
    prompt_len = 0;
    int64_t longest = 0;
    for (const auto& p : ids)
      prompt_len += static_cast<int64_t>(p.size()), longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
    if (longest > max_prompt) throw prompt_too_long("the prompt has " + std::to_string(longest) + " tokens", r.chat);
    const int64_t room = context - longest;
    const int64_t most_new = opt.max_tokens > 0 ? std::min(room, opt.max_tokens) : room;
    if (r.max_tokens && *r.max_tokens > most_new) {
      ApiError e = *r.max_tokens > room
                       ? ApiError(400,
                                  "This model's maximum context length is " + std::to_string(context) + " tokens; the prompt has " +
                                      std::to_string(longest) + " and max_tokens asks for " + std::to_string(*r.max_tokens),
                                  "max_tokens", "context_length_exceeded")
                       : ApiError(400,
                                  "max_tokens " + std::to_string(*r.max_tokens) + " is more than the " + std::to_string(opt.max_tokens) +
                                      " this server generates for a request (--max-tokens)",
                                  "max_tokens");
      e.limit = *r.max_tokens > room ? "context_length" : "max_tokens";
      throw e;
    }
    std::vector<llm::RequestQueue::Group> groups;
    for (size_t p = 0; p < ids.size(); ++p) {
      llm::RequestQueue::Group& w = groups.emplace_back();
      w.gone = [ex](Clock::time_point now) {
        std::lock_guard<std::mutex> lock(ex->mu);
        return ex->expired(now);
      };
      w.refuse_memory = [ex](const MemoryLimitError& e) {
        std::lock_guard<std::mutex> lock(ex->mu);
        ex->error = e.what();
        ex->refused.emplace(400, std::string(e.what()) + " (ask for fewer max_tokens, or start tern serve with a smaller --window)",
                            "max_tokens");
        ex->refused->limit = "max_memory";
      };
      for (int j = 0; j < r.n; ++j) {
        const size_t i = p * static_cast<size_t>(r.n) + static_cast<size_t>(j);  // the choice's index
        ex->choices.emplace_back(*tok, ids[p], r.stop);
        ex->choices.back().echo = echoes[p];
        const int64_t own_room = context - static_cast<int64_t>(ids[p].size());
        llm::SequenceRequest s = sequence_request(
            r, i, ids[p], r.max_tokens.value_or(opt.max_tokens > 0 ? std::min(own_room, opt.max_tokens) : own_room), cfg, chat_turn_ends);
        s.on_token = [this, ex, i](int64_t t) { return on_token(*ex, i, t); };
        if (r.logprobs >= 0) s.on_logprobs = [this, ex, i](const llm::TokenLogprobs& lp) { on_logprobs(*ex, i, lp); };
        s.constraint = choice_constraint(r, r.chat ? &chat_template : nullptr, [&] {
          std::call_once(json_vocabulary_made, [&] { json_vocabulary = std::make_shared<const llm::JsonVocabulary>(*tok); });
          return json_vocabulary;
        });
        s.on_finish = [this, ex, i](llm::FinishReason why) { on_finish(*ex, i, why); };
        s.cancelled = [this, ex] {
          std::lock_guard<std::mutex> lock(ex->mu);
          return hard_stopped() || ex->expired(Clock::now());
        };
        llm::GenerateOptions check;
        check.max_new_tokens = s.max_new_tokens;
        check.sampling = s.sampling;
        check.top_logits = s.top_logprobs;
        try {
          gen->check_request({s.prompt}, check);
        } catch (const Error& e) {
          throw ApiError(400, (r.prompts.size() > 1 ? "prompt " + std::to_string(p) + ": " : std::string()) + e.what(),
                         r.chat ? "" : "prompt");
        }
        w.sequences.push_back(std::move(s));
      }
    }
    admit_or_throw(queue->push(std::move(groups)));
    return ex;
  }
  size_t body_cap() const { return std::min(opt.max_body_bytes, most_body_bytes); }
  // A request refused for its body (past the cap, cut short, to a route that takes none) or by httplib itself
  // (the error handler): one JSON error, a 413 counted by the limit it met.
  void refuse_body(httplib::Response& res, int status, const std::string& message) {
    ApiError e(status, message, "",
               status == 413 && opt.max_body_bytes > most_body_bytes ? "context_length_exceeded" : "invalid_request_error");
    if (status == 413)
      metrics.count_refused(opt.max_body_bytes <= most_body_bytes ? "max_body"
                            : max_prompt < context                ? "max_prompt_tokens"
                                                                  : "context_length");
    reply_error(res, "other", e);
  }
  std::string body_too_large() const {
    if (!batcher && opt.max_body_bytes > most_body_bytes)
      return "the request body is larger than " + std::to_string(most_body_bytes) + " bytes, more than " +
             std::to_string(kMaxEmbeddingInputs) + " inputs of " + std::to_string(embedder->max_tokens()) + " tokens can need";
    if (opt.max_body_bytes <= most_body_bytes)
      return "the request body is larger than " + std::to_string(opt.max_body_bytes) + " bytes (--max-body)";
    return "the request body is larger than " + std::to_string(most_body_bytes) + " bytes, more than a prompt of " +
           std::to_string(max_prompt) + " tokens can need (" + (max_prompt < context ? "--max-prompt-tokens" : "the model's context") + ")";
  }
  // The prompt-length refusal: the model's context (OpenAI's code for it) or this server's own limit.
  ApiError prompt_too_long(const std::string& what, bool chat) const {
    const std::string field = chat ? "messages" : "prompt";
    ApiError e =
        max_prompt < context
            ? ApiError(400, what + "; this server takes prompts of at most " + std::to_string(max_prompt) + " tokens (--max-prompt-tokens)",
                       field)
            : ApiError(400, "This model's maximum context length is " + std::to_string(context) + " tokens; " + what, field,
                       "context_length_exceeded");
    e.limit = max_prompt < context ? "max_prompt_tokens" : "context_length";
    return e;
  }
  // The queue's answer as the API's: a 429 when it cannot take the sequences, a 503 once stopping.
  void admit_or_throw(llm::RequestQueue::Admission a) const {
    if (a == llm::RequestQueue::Admission::Stopping || stopping) throw shutting_down();
    if (a == llm::RequestQueue::Admission::Full) {
      ApiError e(429,
                 "the server is busy: " + std::to_string(queue->waiting()) + " sequences are waiting (--queue " +
                     std::to_string(opt.queue) + "); retry later",
                 "", "rate_limit_exceeded");
      e.limit = "queue";
      throw e;
    }
  }
  // A weights file of a served model that changed under its mapping (truncated or written over: core/mapped_file.h):
  // every run on it fails, so requests are refused at once and /health says why, the server alive to say so.
  std::string changed_model_file() const {
    const std::string changed = session ? session->changed_file() : "";
    return !changed.empty() ? changed : embedder ? embedder->changed_file() : "";
  }
  void refuse_if_model_changed() const {
    const std::string changed = changed_model_file();
    if (!changed.empty())
      throw ApiError(503, "the model file '" + changed + "' changed under this server (truncated or written over): restart tern serve", "",
                     "server_error");
  }
  static ApiError shutting_down() {
    ApiError e(503, "the server is shutting down", "", "server_error");
    e.limit = "shutting_down";
    return e;
  }

  // (the scheduler's thread) Each token's text decoded alone, outside the exchange's lock.
  void on_logprobs(Exchange& ex, size_t i, const llm::TokenLogprobs& lp) {
    TokenLogprob t = token_logprob(*tok, lp);
    std::lock_guard<std::mutex> lock(ex.mu);
    ex.choices[i].ready_logprobs.push_back(std::move(t));
  }

  bool on_token(Exchange& ex, size_t i, int64_t token) {
    std::lock_guard<std::mutex> lock(ex.mu);
    if (ex.cancelled) return false;
    auto& c = ex.choices[i];
    const auto now = Clock::now();
    { metrics.count_token(std::chrono::duration<double>(now - (c.tokens == 0 ? ex.start : c.last_token)).count(), c.tokens == 0); }
    c.last_token = now;
    const bool more = c.push(token);
    const bool gone = ex.expired(now);
    ex.cv.notify_all();
    return more && !gone;
  }

  void on_finish(Exchange& ex, size_t i, llm::FinishReason why) {
    std::lock_guard<std::mutex> lock(ex.mu);
    auto& c = ex.choices[i];
    if (why == llm::FinishReason::Error && !ex.refused)
      ex.error = hard_stopped() ? "the server stopped before this request finished (its grace period, --grace, ended)"
                                : "the sequence ended early: its model run failed (see the server's log)";
    c.finish(why);
    c.done = true;
    ex.cv.notify_all();
  }

  void complete(const httplib::Request& req, httplib::Response& res, bool chat) {
    const std::string endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
    CompletionRequest r;
    int64_t prompt_len = 0;
    std::shared_ptr<Exchange> ex;
    try {
      if (!batcher) throw ApiError(400, "the model '" + model_name + "' is an encoder: this server answers /v1/embeddings only", "model");
      r = parse_completion_request(req.body, chat);
      if (r.model.empty()) r.model = model_name;
      ex = submit(r, prompt_len);
    } catch (const ApiError& e) {
      return reply_error(res, endpoint, e);
    } catch (const Error& e) {  // a tokenizer or template failing on this text
      return reply_error(res, endpoint, ApiError(400, e.what()));
    }
    metrics.count_prompt_tokens(prompt_len * r.n);
    const std::string id = random_id(chat ? "chatcmpl-" : "cmpl-");
    const int64_t created = unix_now();
    if (!r.stream) {
      // The answer, or the deadline: then the sequences stop at their next token (or leave the queue) and
      // the client gets its 504 at once. (cpp-httplib 0.11 tells a handler nothing of a client that left
      // before its response; the deadline bounds the work such a request can cost.)
      std::unique_lock<std::mutex> lock(ex->mu);
      if (!ex->cv.wait_until(lock, ex->deadline, [&] { return ex->all_done(); })) ex->expired(Clock::now());
      if (ex->timed_out) {
        metrics.count_cancelled("timeout");
        return reply_error(res, endpoint, ApiError(504, "the request ran past the server's timeout (--timeout)", "", "timeout"));
      }
      if (!ex->error.empty()) {
        if (hard_stopped()) metrics.count_cancelled("shutdown");
        return reply_error(res, endpoint, ex->failure(hard_stopped()));
      }
      std::vector<Choice> choices;
      Usage usage{prompt_len, 0};  // (each prompt once, as OpenAI counts it, whatever n)
      for (auto& c : ex->choices) {
        Choice choice;
        choice.text = c.echo + c.ready;
        choice.finish_reason = c.finish_reason;
        choice.logprobs = logprobs_json(r, c.ready_logprobs, c.echo.size());
        take_tool_calls(r, choice);
        choices.push_back(std::move(choice));
        usage.completion_tokens += c.tokens;
      }
      res.set_content(to_wire(completion_response(r, id, created, choices, usage)), "application/json");
      return metrics.count_request(endpoint, 200);
    }
    metrics.count_request(endpoint, 200);
    struct StreamState {
      std::vector<char> opened;  // per choice: its first chunk (role, echo) sent
      std::vector<char> finished;
      bool ended = false;
      const char* cancelled_why = nullptr;  // the stream ended early: why (counted once, when it closes)
    };
    auto st = std::make_shared<StreamState>();
    st->opened.assign(ex->choices.size(), 0);
    st->finished.assign(ex->choices.size(), 0);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, ex, st, r, id, created, prompt_len](size_t, httplib::DataSink& sink) {
          if (st->ended) return false;
          std::string out;
          {
            std::unique_lock<std::mutex> lock(ex->mu);
            auto has_news = [&] {  // (a request that offers tools has none before a choice is done)
              for (size_t i = 0; i < ex->choices.size(); ++i) {
                const auto& c = ex->choices[i];
                if ((c.done && !st->finished[i]) || (!r.calls_tools() && (!c.ready.empty() || !st->opened[i]))) return true;
              }
              return false;
            };
            ex->cv.wait_for(lock, std::chrono::milliseconds(200), has_news);
            ex->expired(Clock::now());  // past its deadline a choice ends now (the error event), not at its next token
            for (size_t i = 0; i < ex->choices.size(); ++i) {
              auto& c = ex->choices[i];
              if (r.calls_tools() && !c.done && !ex->timed_out) continue;  // (its text whole first: is it a tool call?)
              if (r.calls_tools() && c.done && !st->finished[i] && ex->error.empty())
                for (const json& chunk : tool_call_chunks(r, id, created, static_cast<int>(i), c, st->opened[i])) {
                  out += "data: " + to_wire(chunk) + "\n\n";
                  st->opened[i] = 1;
                }
              const bool open = !st->opened[i];
              if (open || !c.ready.empty() || !c.ready_logprobs.empty()) {
                const std::string text = (open ? c.echo : "") + c.ready;
                const json lp = logprobs_json(r, c.ready_logprobs, c.sent_bytes + (open ? c.echo.size() : 0));
                out += "data: " + to_wire(completion_chunk(r, id, created, static_cast<int>(i), text, "", open && r.chat, lp)) + "\n\n";
                c.sent_bytes += text.size();
                c.ready.clear();
                c.ready_logprobs.clear();
                st->opened[i] = 1;
              }
              if ((c.done || ex->timed_out) && !st->finished[i]) {
                if (ex->timed_out || !ex->error.empty()) {
                  const ApiError e = ex->timed_out ? ApiError(504, "the request ran past the server's timeout (--timeout)", "", "timeout")
                                                   : ex->failure(hard_stopped());
                  out += "data: " + error_body(e) + "\n\n";
                  if (ex->timed_out || hard_stopped()) st->cancelled_why = ex->timed_out ? "timeout" : "shutdown";
                } else {
                  out += "data: " + to_wire(completion_chunk(r, id, created, static_cast<int>(i), "", c.finish_reason)) + "\n\n";
                }
                st->finished[i] = 1;
              }
            }
            if (std::all_of(st->finished.begin(), st->finished.end(), [](char f) { return f != 0; })) {
              if (r.include_usage) {
                Usage usage{prompt_len, 0};  // (each prompt once, as OpenAI counts it, whatever n)
                for (const auto& c : ex->choices) usage.completion_tokens += c.tokens;
                out += "data: " + to_wire(usage_chunk(r, id, created, usage)) + "\n\n";
              }
              out += "data: [DONE]\n\n";
              st->ended = true;
            }
          }
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;
          if (st->ended) sink.done();
          return true;
        },
        [this, ex, st](bool) {  // the stream ended or the client went away: stop its sequences at their next token
          const char* why = st->cancelled_why;
          {
            std::lock_guard<std::mutex> lock(ex->mu);
            if (!why && !st->ended) why = "client_left";
            ex->cancelled = true;
          }
          if (why) metrics.count_cancelled(why);
        });
  }

  static constexpr size_t kMaxEmbeddingInputs = 2048;  // inputs a request may hold (OpenAI's limit)

  // /v1/embeddings on this HTTP thread: tokenized, checked against the encoder's max_tokens (refused, never
  // truncated), run in padded batches, pooled.
  void embeddings_route(const httplib::Request& req, httplib::Response& res, bool) { embeddings(req, res); }
  void embeddings(const httplib::Request& req, httplib::Response& res) {
    const std::string endpoint = "/v1/embeddings";
    try {
      if (!embedder)
        throw ApiError(400,
                       "this server has no embedding model: start it with --embedding-model FOLDER (a sentence-transformers "
                       "encoder) or --embeddings (the decoder's own)",
                       "model");
      if (stopping) throw shutting_down();
      refuse_if_model_changed();
      EmbeddingRequest r = parse_embedding_request(req.body);
      if (r.model.empty()) r.model = embedding_model_name;
      if (r.dimensions && *r.dimensions != embedder->dimensions())
        throw ApiError(400,
                       "'dimensions' " + std::to_string(*r.dimensions) + ": this model's embeddings have " +
                           std::to_string(embedder->dimensions()) + " (tern does not shorten them)",
                       "dimensions");
      const int64_t most = embedder->max_tokens();
      auto too_long = [&](size_t i, const std::string& what) {
        ApiError e(400,
                   "This model's maximum context length is " + std::to_string(most) + " tokens; input " + std::to_string(i) + " " + what,
                   "input", "context_length_exceeded");
        e.limit = "context_length";
        return e;
      };
      std::vector<std::vector<int64_t>> rows;
      int64_t tokens = 0;
      for (size_t i = 0; i < r.inputs.size(); ++i) {
        const PromptInput& in = r.inputs[i];
        if (!in.is_ids && in.text.size() > most_input_bytes) throw too_long(i, "has " + std::to_string(in.text.size()) + " bytes");
        rows.push_back(in.is_ids ? in.ids : embedder->encode(in.text));
        if (static_cast<int64_t>(rows.back().size()) > most) throw too_long(i, "has " + std::to_string(rows.back().size()) + " tokens");
        tokens += static_cast<int64_t>(rows.back().size());
      }
      std::vector<std::vector<float>> vectors;
      try {
        std::lock_guard<std::mutex> one_at_a_time(embed_mu);
        vectors = embedder->embed(rows);
      } catch (const Error& e) {  // token ids outside the vocabulary
        throw ApiError(400, e.what(), "input");
      }
      res.set_content(to_wire(embedding_response(r, r.model, vectors, tokens)), "application/json");
      metrics.count_request(endpoint, 200);
      metrics.count_prompt_tokens(tokens);
    } catch (const ApiError& e) {
      reply_error(res, endpoint, e);
    } catch (const Error& e) {  // the tokenizer failing on this text
      reply_error(res, endpoint, ApiError(400, e.what(), "input"));
    }
  }

  // The Access-Control-Allow-Origin a response to this request carries ("" : none): "*", or the request's Origin when
  // --cors-origin lists it.
  std::string allowed_origin(const httplib::Request& req) const {
    if (opt.cors_origin.empty()) return "";
    if (opt.cors_origin == "*") return "*";
    const std::string origin = req.get_header_value("Origin");
    std::string_view list = opt.cors_origin;
    while (!list.empty()) {
      const size_t comma = list.find(',');
      std::string_view o = list.substr(0, comma);
      while (!o.empty() && o.front() == ' ') o.remove_prefix(1);
      while (!o.empty() && o.back() == ' ') o.remove_suffix(1);
      if (!origin.empty() && o == origin) return origin;
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
    return "";
  }

  // The models /v1/models lists: the decoder (unless the server serves embeddings only), the embedding model.
  json model_objects() const {
    json list = json::array();
    if (batcher)
      list.push_back({{"id", model_name}, {"object", "model"}, {"created", unix_now()}, {"owned_by", "tern"}, {"context_length", context}});
    if (batcher && embedder && opt.decoder_embeddings)  // (one model for both)
      list.back()["dimensions"] = embedder->dimensions();
    else if (embedder)
      list.push_back({{"id", embedding_model_name},
                      {"object", "model"},
                      {"created", unix_now()},
                      {"owned_by", "tern"},
                      {"context_length", embedder->max_tokens()},
                      {"dimensions", embedder->dimensions()}});
    return list;
  }

  void routes() {
    // A request holds its HTTP thread until answered (a stream for its whole length), and a connection that sends
    // nothing holds one for its read timeout: threads start as connections come (connection_threads.h), so a
    // request finds one at once and gets its answer or its 429 — with 64 fixed threads and a queue of 64, a burst
    // of 200 waited unanswered behind the busy ones (issue 53); with 84, 600 half-open connections held /health
    // 10-70 s (issue 79). At most 8192 (or a thread for every row and queue place and 16 more).
    const auto threads = static_cast<size_t>(std::max<int64_t>(opt.parallel + opt.queue + 16, 8192));
    http.new_task_queue = [threads] { return new ConnectionThreads(threads, std::chrono::seconds(30)); };
    http.set_payload_max_length(body_cap());
    // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, with which a second server on a busy port
    // binds anyway and takes half its traffic; without it the bind fails ("address in use").
    http.set_socket_options([this](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof yes);
      listen_socket = sock;  // (run() widens its backlog)
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const std::string changed = changed_model_file();
      if (!changed.empty()) {  // (out of the load balancer's rotation: every run on it fails)
        res.status = 503;
        res.set_content(to_wire({{"status", "error"}, {"error", "the model file '" + changed + "' changed under this server"}}),
                        "application/json");
      } else {
        res.set_content(R"({"status":"ok"})", "application/json");
      }
      metrics.count_request("/health", changed.empty() ? 200 : 503);
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(to_wire({{"object", "list"}, {"data", model_objects()}}), "application/json");
      metrics.count_request("/v1/models", 200);
    });
    http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::string served;
      for (const json& m : model_objects()) {
        if (m["id"] == req.matches[1].str()) {
          res.set_content(to_wire(m), "application/json");
          metrics.count_request("/v1/models/{id}", 200);
          return;
        }
        served += (served.empty() ? "'" : ", '") + m["id"].get<std::string>() + "'";
      }
      ApiError e(404, "The model '" + req.matches[1].str() + "' does not exist (this server serves " + served + ")", "model");
      e.code = "model_not_found";
      return reply_error(res, "/v1/models/{id}", e);
      metrics.count_request("/v1/models/{id}", 200);
    });
    // --api-key: checked before routing (a preflight carries no credentials, /health is for load balancers).
    // --cors-origin: a preflight (OPTIONS) gets the methods and headers the API takes; every response, errors
    // included, names the origin allowed.
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (req.method == "OPTIONS") {
        const std::string origin = allowed_origin(req);
        if (origin.empty()) return httplib::Server::HandlerResponse::Unhandled;  // (404)
        res.status = 204;
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
        res.set_header("Access-Control-Max-Age", "86400");
        metrics.count_request("OPTIONS", 204);
        return httplib::Server::HandlerResponse::Handled;
      }
      if (opt.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
      const std::string auth = req.get_header_value("Authorization");
      if (auth.size() > 7 && auth.compare(0, 7, "Bearer ") == 0 && same_secret(std::string_view(auth).substr(7), opt.api_key))
        return httplib::Server::HandlerResponse::Unhandled;
      ApiError e(401, auth.empty() ? "this server needs an API key: send the header 'Authorization: Bearer KEY'"
                                   : "the API key is not this server's");
      e.code = "invalid_api_key";
      e.limit = "api_key";
      res.set_header("WWW-Authenticate", "Bearer");
      reply_error(res, "other", e);
      return httplib::Server::HandlerResponse::Handled;
    });
    http.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const std::string origin = allowed_origin(req);
      if (origin.empty()) return;
      res.set_header("Access-Control-Allow-Origin", origin);
      if (origin != "*") res.set_header("Vary", "Origin");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.text(queue.get(), opt.parallel), "text/plain; version=0.0.4");
    });
    // The bodies are read here, a piece at a time, kept up to the cap whatever the framing: cpp-httplib 0.11.4 caps
    // a Content-Length body (reading past the rest unkept, then 413) but reads a chunked one whole (200 × 1 MB
    // chunks took RSS from 26 to 279 MB before a 400: issue 79). Past the cap the rest is read and dropped, so the
    // connection stays in step for its next request (answering before the body is read left its bytes to be
    // parsed as a request line, a byte at a time: the soak's normal clients slowed 2.5x), up to kMostDropped.
    auto with_body = [this](void (Impl::*handle)(const httplib::Request&, httplib::Response&, bool), bool chat) {
      return [this, handle, chat](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
        constexpr size_t kMostDropped = size_t{1} << 30;  // (a client streaming forever is cut off there)
        httplib::Request whole = req;
        size_t received = 0;
        const bool ended = read([&](const char* data, size_t n) {
          received += n;
          if (received <= body_cap()) whole.body.append(data, n);
          return received <= kMostDropped;
        });
        if (received > body_cap() || res.status == 413) return refuse_body(res, 413, body_too_large());
        if (!ended) return refuse_body(res, 400, "the request body ended before its length or its last chunk");
        (this->*handle)(whole, res, chat);
      };
    };
    // Any other route given a body reads it unkept, then answers 404 (before: read whole into memory first).
    auto no_route = [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
      size_t received = 0;
      read([&](const char*, size_t n) { return (received += n) <= (size_t{1} << 30); });
      refuse_body(res, 404, "no route " + req.method + " " + req.path);
    };
    http.Post("/v1/completions", with_body(&Impl::complete, false));
    http.Post("/v1/chat/completions", with_body(&Impl::complete, true));
    http.Post("/v1/embeddings", with_body(&Impl::embeddings_route, false));
    http.Post(".*", no_route);
    http.Put(".*", no_route);
    http.Patch(".*", no_route);
    http.Delete(".*", no_route);
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // (an ApiError reply already)
      const int status = res.status;
      refuse_body(res, status,
                  status == 404   ? "no route " + req.method + " " + req.path
                  : status == 413 ? body_too_large()
                                  : "HTTP " + std::to_string(status));
    });
  }
};

Server::Server(const ServerOptions& options) : impl_(std::make_unique<Impl>(options)) {}

Server::~Server() {
  impl_->stopping = true;
  if (impl_->queue) impl_->queue->stop_now();
  impl_->http.stop();
  if (impl_->queue) impl_->queue->join();
}

bool Server::run() {
  Impl& s = *impl_;
  if (s.stopping) return true;  // (stopped before it started)
  const int port = s.opt.port == 0 ? s.http.bind_to_any_port(s.opt.host) : (s.http.bind_to_port(s.opt.host, s.opt.port) ? s.opt.port : -1);
  if (port < 0) return false;
  // Debian's compiled cpp-httplib listens with a backlog of 5: of 200 connections at once, the ones past it were
  // reset. listen() again on the bound socket sets the kernel's largest (net.core.somaxconn).
  if (s.listen_socket >= 0) ::listen(s.listen_socket, SOMAXCONN);
  if (s.queue) s.queue->start();
  std::cerr << "tern serve: ";
  if (s.batcher) std::cerr << s.model_name << " (" << s.opt.parallel << " rows, context " << s.context << ")";
  if (s.embedder && s.opt.decoder_embeddings) std::cerr << ", its embeddings (" << s.embedder->dimensions() << " dimensions)";
  else if (s.embedder)
    std::cerr << (s.batcher ? ", " : "") << "embeddings " << s.embedding_model_name << " (" << s.embedder->dimensions() << " dimensions, "
              << s.embedder->max_tokens() << " tokens)";
  std::cerr << (s.opt.api_key.empty() ? "" : ", API key required") << ", listening on http://" << s.opt.host << ":" << port << std::endl;
  // (returns once stop() closed the socket and every handler returned: each waits for its request's answer,
  // which the scheduler gives within the grace period)
  s.http.listen_after_bind();
  s.stopping = true;
  if (s.queue) {
    s.queue->stop(Clock::now());  // (the listener ended on its own: no grace; else stop()'s stands)
    s.queue->join();
  }
  return true;
}

void Server::stop() {
  Impl& s = *impl_;
  const bool again = s.stopping.exchange(true);
  if (s.queue && again) s.queue->stop_now();  // a second stop: now
  else if (s.queue) s.queue->stop(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.opt.grace_s)));
  s.http.stop();
}

}  // namespace tern::serve
