// tern serve: the OpenAI HTTP API (llm/openai_api.h) over continuous batching
// (llm/continuous_batch.h). HTTP threads (cpp-httplib) parse, tokenize and check a request, then queue
// its sequences; one scheduler thread owns the session and runs a step for every active row, handing
// each new token back to its request, which streams it (server-sent events) or collects it. Embeddings
// (llm/embedder.h) run on the HTTP thread of their request: an encoder session takes concurrent runs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "llm/embedder.h"
#include "llm/model_folder.h"
#include "llm/openai_api.h"

namespace tern::serve {

struct ServerOptions {
  std::string model_path;  // a model folder or .onnx file; an encoder folder (llm::is_encoder_folder): embeddings only
  std::string dtype;       // an onnx-community repository's variant (llm::resolve_model; "": its default)
  // An encoder folder (sentence-transformers' layout) beside the decoder, for /v1/embeddings ("": none).
  std::string embedding_model;
  // The decoder's own embeddings on /v1/embeddings too (`--embeddings`, as llama-server's): its final hidden state
  // pooled as `pooling` says, L2-normalized (llm/embedder.h).
  bool decoder_embeddings = false;
  llm::Pooling pooling = llm::Pooling::LastToken;
  std::string model_name;  // the id /v1/models lists ("" : the folder's name)
  std::string host = "127.0.0.1";
  int port = 8080;                                // 0: any free port (printed)
  int64_t parallel = 4;                           // sequences decoded at once (rows of the ring cache)
  int64_t queue = 64;                             // sequences waiting for a row; past it requests get 429
  int64_t prefill_chunk = openai::kPrefillChunk;  // prompt tokens a row feeds per step, so others keep decoding
  bool prefix_cache = true;                       // a prompt beginning with what an idle row holds feeds only the rest
  std::string speculate;                          // every row's drafts checked in its runs (--speculate: llm::parse_speculation's text)
  std::string draft_model;                        // --draft-model: a model of the same vocabulary whose greedy continuation is the drafts
  double timeout_s = 600;                         // a request still running after this ends (504, or an error event)
  double grace_s = 10;                            // after stop(): requests running or queued get this long to finish, then end (503)
  size_t max_body_bytes = size_t{8} << 20;        // a larger request body: 413
  int64_t max_prompt_tokens = 0;                  // a longer prompt: 400 (0: the model's context)
  int64_t max_tokens = 0;                         // the most new tokens a choice may ask for (0: what the context leaves)
  std::string api_key;      // non-empty: every request but /health and CORS preflights needs "Authorization: Bearer KEY" (401)
  std::string cors_origin;  // non-empty: browsers from these origins (comma-separated, or "*") may call it; preflights answered
  llm::DecoderOptions decoder;
};

class Server {
 public:
  explicit Server(const ServerOptions& options);  // loads the model; throws naming what is wrong
  ~Server();
  // Binds, prints "tern serve: listening on http://HOST:PORT" on stderr, and serves until stop()
  // (from another thread or a signal) has let its requests finish. Returns false when the address cannot be bound.
  bool run();
  // Stops listening and refuses new requests (503); those running or queued get ServerOptions::grace_s to finish,
  // then end with an error. A second stop() ends them at once.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::serve
