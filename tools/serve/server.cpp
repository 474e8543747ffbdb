#include "tools/serve/server_impl.h"

namespace tern::serve {

Server::Impl::Impl(const ServerOptions& o) : opt(o) {
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
    so.decoder.hidden_state_of = "logits";
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
  context = cfg.context_length > 0 ? cfg.context_length : session->options().decoder.ring_capacity;
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
  if (!o.draft_model.empty()) {
    const llm::ModelFiles draft_files = llm::resolve_model(o.draft_model);
    const llm::ModelConfig draft_cfg = llm::read_model_config(draft_files.dir);
    llm::check_same_vocabulary(tok.get(), llm::load_tokenizer(draft_files.dir).get(), cfg, draft_cfg, files.dir, draft_files.dir);
    draft_session = std::make_unique<Session>(draft_files.onnx, llm::decoder_session_options(o.decoder, draft_cfg, true));
    draft = std::make_unique<llm::DraftModel>(*draft_session, draft_cfg, cfg.vocab_size, o.parallel);
  }
  speculation = llm::parse_speculation(o.speculate, draft.get());
  batcher = std::make_unique<llm::ContinuousBatcher>(*session, *gen, o.parallel, o.prefill_chunk, o.prefix_cache);
  queue = std::make_unique<llm::RequestQueue>(*batcher, o.queue);
  routes();
}

// More text than this cannot encode to `tokens` tokens or fewer (x2: a normalizer may shorten text, NFKC's
// ligatures by a third), known before encoding it.
size_t Server::Impl::most_text_bytes(int64_t tokens, const llm::Tokenizer& t) {
  return 2 * static_cast<size_t>(tokens) * std::max<size_t>(t.longest_token_bytes(), 1) + 4096;
}

void Server::Impl::reply_error(httplib::Response& res, const std::string& endpoint, const ApiError& e) {
  if (!e.limit.empty()) metrics.count_refused(e.limit);
  res.status = e.status;
  if (e.status == 429) res.set_header("Retry-After", "1");
  res.set_content(error_body(e), "application/json");
  metrics.count_request(endpoint, e.status);
}

// A request refused for its body (past the cap, cut short, to a route that takes none) or by httplib itself
// (the error handler): one JSON error, a 413 counted by the limit it met.
void Server::Impl::refuse_body(httplib::Response& res, int status, const std::string& message) {
  ApiError e(status, message, "",
             status == 413 && opt.max_body_bytes > most_body_bytes ? "context_length_exceeded" : "invalid_request_error");
  if (status == 413)
    metrics.count_refused(opt.max_body_bytes <= most_body_bytes ? "max_body"
                          : max_prompt < context                ? "max_prompt_tokens"
                                                                : "context_length");
  reply_error(res, "other", e);
}

std::string Server::Impl::body_too_large() const {
  if (!batcher && opt.max_body_bytes > most_body_bytes)
    return "the request body is larger than " + std::to_string(most_body_bytes) + " bytes, more than " +
           std::to_string(kMaxEmbeddingInputs) + " inputs of " + std::to_string(embedder->max_tokens()) + " tokens can need";
  if (opt.max_body_bytes <= most_body_bytes)
    return "the request body is larger than " + std::to_string(opt.max_body_bytes) + " bytes (--max-body)";
  return "the request body is larger than " + std::to_string(most_body_bytes) + " bytes, more than a prompt of " +
         std::to_string(max_prompt) + " tokens can need (" + (max_prompt < context ? "--max-prompt-tokens" : "the model's context") + ")";
}

// The prompt-length refusal: the model's context (OpenAI's code for it) or this server's own limit.
ApiError Server::Impl::prompt_too_long(const std::string& what, bool chat) const {
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
void Server::Impl::admit_or_throw(llm::RequestQueue::Admission a) const {
  if (a == llm::RequestQueue::Admission::Stopping || stopping) throw shutting_down();
  if (a == llm::RequestQueue::Admission::Full) {
    ApiError e(429,
               "the server is busy: " + std::to_string(queue->waiting()) + " sequences are waiting (--queue " + std::to_string(opt.queue) +
                   "); retry later",
               "", "rate_limit_exceeded");
    e.limit = "queue";
    throw e;
  }
}

// A weights file of a served model that changed under its mapping (truncated or written over: core/mapped_file.h):
// every run on it fails, so requests are refused at once and /health says why, the server alive to say so.
std::string Server::Impl::changed_model_file() const {
  const std::string changed = session ? session->changed_file() : "";
  return !changed.empty() ? changed : embedder ? embedder->changed_file() : "";
}

void Server::Impl::refuse_if_model_changed() const {
  const std::string changed = changed_model_file();
  if (!changed.empty())
    throw ApiError(503, "the model file '" + changed + "' changed under this server (truncated or written over): restart tern serve", "",
                   "server_error");
}

ApiError Server::Impl::shutting_down() {
  ApiError e(503, "the server is shutting down", "", "server_error");
  e.limit = "shutting_down";
  return e;
}

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
