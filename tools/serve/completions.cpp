#include "tools/serve/server_impl.h"

namespace tern::serve {

// Tokenizes and checks a request, queues its choices and returns their exchange; throws ApiError.
// Cheap checks come first — a full queue, a text no context could hold — so that a burst of requests or a
// megabyte of text costs no tokenization (issue 53: 100 KB words were tokenized, then refused for length).
//
// The deadline starts now and covers tokenization too: the encoder asks between words and within long ones.
std::shared_ptr<Exchange> Server::Impl::submit(const CompletionRequest& r, int64_t& prompt_len) {
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
      s.speculation = speculation;
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

// (the scheduler's thread) Each token's text decoded alone, outside the exchange's lock.
void Server::Impl::on_logprobs(Exchange& ex, size_t i, const llm::TokenLogprobs& lp) {
  TokenLogprob t = token_logprob(*tok, lp);
  std::lock_guard<std::mutex> lock(ex.mu);
  ex.choices[i].ready_logprobs.push_back(std::move(t));
}

bool Server::Impl::on_token(Exchange& ex, size_t i, int64_t token) {
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

void Server::Impl::on_finish(Exchange& ex, size_t i, llm::FinishReason why) {
  std::lock_guard<std::mutex> lock(ex.mu);
  auto& c = ex.choices[i];
  if (why == llm::FinishReason::Error && !ex.refused)
    ex.error = hard_stopped() ? "the server stopped before this request finished (its grace period, --grace, ended)"
                              : "the sequence ended early: its model run failed (see the server's log)";
  c.finish(why);
  c.done = true;
  ex.cv.notify_all();
}

void Server::Impl::complete(const httplib::Request& req, httplib::Response& res, bool chat) {
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

}  // namespace tern::serve
