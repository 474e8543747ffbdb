#include "tools/serve/server_impl.h"

namespace tern::serve {

namespace {

// Equal strings, in a time that depends on their lengths only (an API key is not guessed byte by byte from timings).
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace

void Server::Impl::embeddings(const httplib::Request& req, httplib::Response& res) {
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
      ApiError e(400, "This model's maximum context length is " + std::to_string(most) + " tokens; input " + std::to_string(i) + " " + what,
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
std::string Server::Impl::allowed_origin(const httplib::Request& req) const {
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
json Server::Impl::model_objects() const {
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

void Server::Impl::routes() {
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

}  // namespace tern::serve
