// The C API's generation: sampling settings, prefill and steps, logits, rewinding, JSON-constrained sampling, whole
// generations, text streams and beam search, over one tern_model's sequence.
#include <chrono>

#include "api/model_helpers.h"
#include "llm/openai_api.h"

using namespace tern;
using namespace tern::api;

extern "C" {

void tern_sampling_default(tern_sampling* s) {
  if (!s) return;
  *s = tern_sampling{0.0f, 0, 1.0f, 0.0f, 1.0f, 0};
}

tern_status tern_model_sampling_default(const tern_model* m, tern_sampling* sampling) {
  if (!m || !m->session || !sampling) return TERN_ERROR_INVALID_ARGUMENT;
  *sampling = model_sampling(*m);
  return TERN_OK;
}

tern_status tern_model_reset(tern_model* m) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] { reset(m); });
}

tern_status tern_model_prefill(tern_model* m, const int32_t* ids, size_t count) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    const std::vector<int64_t> checked = ids_of(m, ids, count);
    feed(m, checked.data(), checked.size());
  });
}

tern_status tern_model_set_sampling(tern_model* m, const tern_sampling* sampling) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(sampling, "sampling");
    m->sampler = sampler_for(*sampling);
  });
}

tern_status tern_chat_completion(tern_model* m, const char* request, tern_text_callback on_chunk, void* user_data, const char** response,
                                 size_t* length) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(request, "request");
    need(response, "response");
    need(length, "length");
    openai::CompletionRequest r;
    try {
      r = openai::parse_completion_request(request, true);
    } catch (const openai::ApiError& e) {
      refuse(TERN_ERROR_INVALID_ARGUMENT, e.what(), e.param.empty() ? "" : " (field '" + e.param + "')");
    }
    if (r.model.empty()) r.model = std::filesystem::path(m->dir).filename().string();
    const llm::Tokenizer& tok = tokenizer_of(m);
    const std::vector<int64_t> prompt = openai::chat_prompt(tok, chat_of(m), r);
    const int64_t context = m->config.context_length > 0 ? m->config.context_length : m->session->options().decoder.ring_capacity;
    const int64_t room = context - static_cast<int64_t>(prompt.size());
    if (r.max_tokens ? *r.max_tokens > room : room < 1)
      refuse(TERN_ERROR_INVALID_ARGUMENT, "This model's maximum context length is ", context, " tokens; the prompt has ", prompt.size(),
             r.max_tokens ? " and max_tokens asks for " + std::to_string(*r.max_tokens) : std::string());
    // As tern serve runs a request: its choices a group of rows on a ContinuousBatcher over this handle's session
    // and sequence, fed in kPrefillChunk pieces, each choice's text cut at stop strings (openai::ChoiceText).
    const auto n = static_cast<size_t>(r.n);
    std::vector<openai::ChoiceText> choices;
    std::vector<std::vector<openai::TokenLogprob>> logprobs(n);
    std::vector<char> done(n, 0), opened(n, 0);
    bool stopped = false;  // on_chunk asked to stop
    std::shared_ptr<const llm::JsonVocabulary> vocabulary;
    std::vector<llm::SequenceRequest> group;
    const std::vector<int64_t> turn_ends = chat_of(m).turn_end_tokens(tok);
    choices.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      choices.emplace_back(tok, prompt, r.stop);
      llm::SequenceRequest s = openai::sequence_request(r, i, prompt, r.max_tokens.value_or(room), m->config, turn_ends);
      s.on_token = [&, i](int64_t t) { return choices[i].push(t) && !stopped; };
      if (r.logprobs >= 0) s.on_logprobs = [&, i](const llm::TokenLogprobs& lp) { logprobs[i].push_back(openai::token_logprob(tok, lp)); };
      s.constraint = openai::choice_constraint(r, &chat_of(m), [&] {
        if (!vocabulary) vocabulary = std::make_shared<const llm::JsonVocabulary>(tok);
        return vocabulary;
      });
      s.on_finish = [&, i](llm::FinishReason why) {
        choices[i].finish(why);
        done[i] = 1;
      };
      group.push_back(std::move(s));
    }
    const std::string id = openai::random_id("chatcmpl-");
    const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::vector<size_t> sent(n, 0);  // (a stream) bytes of each choice's text sent: its next logprobs' offset
    auto send = [&](const nlohmann::json& chunk) {
      const std::string wire = openai::to_wire(chunk);
      if (!stopped && on_chunk && on_chunk(wire.data(), wire.size(), user_data) != 0) stopped = true;
    };
    auto stream_news = [&] {  // each choice's new text (its first chunk opening it with the role), then its end
      for (size_t i = 0; i < n; ++i) {
        auto& c = choices[i];
        if (r.calls_tools() && done[i] != 1) continue;  // (its text whole first: is it a tool call?)
        if (r.calls_tools())
          for (const auto& chunk : openai::tool_call_chunks(r, id, created, static_cast<int>(i), c, opened[i])) {
            send(chunk);
            opened[i] = 1;
          }
        if (!opened[i] || !c.ready.empty() || !logprobs[i].empty()) {
          send(openai::completion_chunk(r, id, created, static_cast<int>(i), c.ready, "", !opened[i],
                                        openai::logprobs_json(r, logprobs[i], sent[i])));
          sent[i] += c.ready.size();
          c.ready.clear();
          logprobs[i].clear();
          opened[i] = 1;
        }
        if (done[i] == 1) {
          send(openai::completion_chunk(r, id, created, static_cast<int>(i), "", c.finish_reason));
          done[i] = 2;
        }
      }
    };
    reset(m);
    {
      llm::ContinuousBatcher batcher(*m->session, *m->generator, r.n, openai::kPrefillChunk, false);
      batcher.add_group(std::move(group));
      while (batcher.step())
        if (r.stream) stream_news();
    }
    reset(m);  // (the batcher's rows emptied: the handle's own sequence starts empty)
    openai::Usage usage{static_cast<int64_t>(prompt.size()), 0};
    for (const auto& c : choices) usage.completion_tokens += c.tokens;
    if (r.stream) {
      stream_news();
      if (r.include_usage) send(openai::usage_chunk(r, id, created, usage));
      m->text.clear();
    } else {
      std::vector<openai::Choice> out;
      for (size_t i = 0; i < n; ++i) {
        openai::Choice c;
        c.text = choices[i].ready;
        c.finish_reason = choices[i].finish_reason;
        c.logprobs = openai::logprobs_json(r, logprobs[i], 0);
        openai::take_tool_calls(r, c);
        out.push_back(std::move(c));
      }
      m->text = openai::to_wire(openai::completion_response(r, id, created, out, usage));
    }
    *response = m->text.c_str();
    *length = m->text.size();
  });
}

tern_status tern_model_rewind(tern_model* m, size_t length) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    end_beams(m);
    if (length > m->tokens.size())
      refuse(TERN_ERROR_INVALID_ARGUMENT, "rewind to ", length, " tokens: the sequence holds ", m->tokens.size());
    if (rewind_rings(m, length)) {
      m->tokens.resize(length);
      m->logits = nullptr;
      return;
    }
    const std::vector<int64_t> kept(m->tokens.begin(), m->tokens.begin() + static_cast<std::ptrdiff_t>(length));
    reset(m);  // (a graph cache is fed again too)
    feed(m, kept.data(), kept.size());
    m->logits = nullptr;
  });
}

tern_status tern_model_set_logits(tern_model* m, const float* logits, int64_t vocab) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(logits, "logits");
    if (!m->logits) refuse(TERN_ERROR_INVALID_ARGUMENT, "no logits yet: prefill the sequence first");
    if (vocab != m->vocab) refuse(TERN_ERROR_INVALID_ARGUMENT, "logits of ", vocab, " values; the vocabulary has ", m->vocab);
    m->own_logits.assign(logits, logits + vocab);
    m->logits = m->own_logits.data();
  });
}

const char* tern_model_type(const tern_model* m) { return m ? m->config.model_type.c_str() : ""; }

int64_t tern_model_pad_token_id(const tern_model* m) { return m ? m->config.pad_token_id : -1; }

tern_status tern_model_end_tokens(tern_model* m, int32_t* ids, size_t capacity, size_t* count) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(count, "count");
    if (capacity > 0) need(ids, "ids");
    copy_ids(m->config.eos_token_ids, ids, capacity, count);
  });
}

tern_status tern_model_set_json_schema(tern_model* m, const char* schema_json, int64_t max_tokens) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    m->constraint.reset();
    if (!schema_json) return;
    if (max_tokens < 0) refuse(TERN_ERROR_INVALID_ARGUMENT, "max_tokens ", max_tokens, ": 0 (no limit) or more");
    m->constraint_left = max_tokens > 0 ? max_tokens : INT64_MAX / 2;
    m->json_schema.reset();
    if (*schema_json) {
      const nlohmann::json schema = nlohmann::json::parse(schema_json, nullptr, false);
      if (schema.is_discarded()) refuse(TERN_ERROR_INVALID_ARGUMENT, "the JSON schema is not JSON text");
      try {
        m->json_schema = std::make_shared<const llm::JsonSchema>(schema);
      } catch (const Error& e) {
        refuse(TERN_ERROR_INVALID_ARGUMENT, "the JSON schema is not one tern can constrain to: ", e.what());
      }
    }
    if (!m->json_vocabulary) m->json_vocabulary = std::make_shared<const llm::JsonVocabulary>(tokenizer_of(m));
    m->constraint = std::make_unique<llm::JsonConstraint>(m->json_vocabulary, m->json_schema);
  });
}

int tern_model_constraint_done(const tern_model* m) { return m && m->constraint && m->constraint->complete(); }

tern_status tern_model_sample(tern_model* m, int32_t* token) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(token, "token");
    *token = static_cast<int32_t>(choose_next(m));
  });
}

tern_status tern_model_step(tern_model* m, int32_t* token) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(token, "token");
    const int64_t next = choose_next(m);
    feed(m, &next, 1);
    *token = static_cast<int32_t>(next);
  });
}

tern_status tern_model_logits(tern_model* m, const float** logits, int64_t* vocab) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(logits, "logits");
    need(vocab, "vocab");
    if (!m->logits) refuse(TERN_ERROR_INVALID_ARGUMENT, "no logits yet: prefill the sequence first");
    *logits = m->logits;
    *vocab = m->vocab;
  });
}

int tern_model_is_end_token(const tern_model* m, int32_t token) {
  if (!m) return 0;
  const auto& ends = m->config.eos_token_ids;
  return std::find(ends.begin(), ends.end(), int64_t{token}) != ends.end() ? 1 : 0;
}

int64_t tern_model_position(const tern_model* m) { return m ? static_cast<int64_t>(m->tokens.size()) : 0; }

void tern_generate_params_default(tern_generate_params* p) {
  if (!p) return;
  *p = tern_generate_params{128, nullptr, nullptr, 0, 0};
}

tern_status tern_generate(tern_model* m, const char* prompt, const tern_generate_params* params, tern_text_callback on_text,
                          void* user_data, int64_t* generated) {
  TERN_LOADED(m);
  if (generated) *generated = 0;
  return guarded(&m->error, [&] {
    need(prompt, "prompt");
    tern_generate_params p;
    tern_generate_params_default(&p);
    if (params) p = *params;
    if (p.max_new_tokens < 1) refuse(TERN_ERROR_INVALID_ARGUMENT, "max_new_tokens ", p.max_new_tokens, " (at least 1)");
    if (p.stop_count > 0) need(p.stop, "stop");
    std::vector<std::string> stops;
    for (size_t i = 0; i < p.stop_count; ++i) {
      need(p.stop[i], "stop[i]");
      if (!*p.stop[i]) refuse(TERN_ERROR_INVALID_ARGUMENT, "stop string ", i, " is empty");
      stops.emplace_back(p.stop[i]);
    }
    const tern_sampling sampling = p.sampling ? *p.sampling : model_sampling(*m);
    m->sampler = sampler_for(sampling);
    const llm::Tokenizer& tok = tokenizer_of(m);
    const std::vector<llm::ChatMessage> turn = {{"user", prompt}};
    const std::vector<int64_t> ids = p.chat ? llm::encode_chat(tok, chat_of(m), turn) : tok.encode(prompt, true);
    llm::GenerateOptions o;
    o.max_new_tokens = p.max_new_tokens;
    m->generator->check_request({ids}, o);  // a prompt past the context, ids outside the vocabulary
    reset(m);
    llm::TextStream text(tok, ids);
    llm::StopScanner stop(stops);
    bool more = true;
    auto deliver = [&](const std::string& piece) {
      if (more && !piece.empty() && on_text) more = on_text(piece.data(), piece.size(), user_data) == 0;
    };
    if (m->speculation.drafts > 0 && !m->constraint) {  // Generator::generate's speculative loop, then the step API's state
      o.sampling = sampling_of(sampling);
      o.eos_token_ids = m->config.eos_token_ids;
      o.speculation = m->speculation;
      const std::vector<int64_t> all = m->generator
                                           ->generate({ids}, o,
                                                      [&](size_t, int64_t t) {
                                                        if (generated) ++*generated;
                                                        deliver(stop.push(text.push(t)));
                                                        return more && !stop.stopped();
                                                      })
                                           .tokens[0];
      deliver(stop.push(text.flush()));
      deliver(stop.flush());
      // The rings hold all but the last token; the current logits are those that chose it: its predecessor fed again.
      const size_t before_last = all.size() - 2;
      if (rewind_rings(m, before_last)) {
        m->tokens.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(before_last));
        feed(m, &all[before_last], 1);
      } else {
        reset(m);
        feed(m, all.data(), all.size() - 1);
      }
      return;
    }
    feed(m, ids.data(), ids.size());
    for (int64_t n = 0; n < p.max_new_tokens && more && !stop.stopped(); ++n) {
      const int64_t next = choose_next(m);
      if (generated) ++*generated;
      const bool eos = tern_model_is_end_token(m, static_cast<int32_t>(next)) != 0;
      deliver(stop.push(text.push(next)));
      if (eos) break;
      if (n + 1 < p.max_new_tokens && more && !stop.stopped()) feed(m, &next, 1);  // (the last one chosen is not fed)
    }
    deliver(stop.push(text.flush()));
    deliver(stop.flush());
  });
}

tern_status tern_model_set_speculation(tern_model* m, const char* speculation, tern_model* draft) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    if (draft && !draft->session) refuse(TERN_ERROR_INVALID_ARGUMENT, "the draft model did not load");
    std::unique_ptr<llm::DraftModel> proposer;
    if (draft) {
      as_argument(
          [&] { llm::check_same_vocabulary(m->tokenizer.get(), draft->tokenizer.get(), m->config, draft->config, m->dir, draft->dir); });
      proposer = std::make_unique<llm::DraftModel>(*draft->session, draft->config, m->config.vocab_size);
    }
    llm::SpeculationOptions o;
    as_argument([&] { o = llm::parse_speculation(speculation ? speculation : "off", proposer.get()); });
    if (o.drafts > 0 && !on_ring(m))
      refuse(TERN_ERROR_UNSUPPORTED, "speculation needs the ring-buffer KV cache, which this model's attention did not take");
    m->speculation = o;
    m->draft = std::move(proposer);
    m->draft_session = m->draft ? draft->session : nullptr;
  });
}

tern_status tern_text_stream_create(tern_model* m, const int32_t* context, size_t context_count, tern_text_stream** stream) {
  TERN_LOADED(m);
  if (stream) *stream = nullptr;
  return guarded(&m->error, [&] {
    need(stream, "stream");
    *stream = new tern_text_stream{m, llm::TextStream(tokenizer_of(m), ids_of(m, context, context_count)), {}};
  });
}

void tern_text_stream_free(tern_text_stream* stream) { delete stream; }

tern_status tern_text_stream_push(tern_text_stream* s, int32_t token, const char** text, size_t* length) {
  if (!s) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&s->model->error, [&] {
    need(text, "text");
    need(length, "length");
    const int64_t id = ids_of(s->model, &token, 1)[0];
    s->text = s->stream.push(id);
    *text = s->text.c_str();
    *length = s->text.size();
  });
}

tern_status tern_text_stream_flush(tern_text_stream* s, const char** text, size_t* length) {
  if (!s) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&s->model->error, [&] {
    need(text, "text");
    need(length, "length");
    s->text = s->stream.flush();
    *text = s->text.c_str();
    *length = s->text.size();
  });
}

}  // extern "C"

void tern_beam_options_default(tern_beam_options* o) {
  if (o) *o = tern_beam_options{4, 1, 1.0f, 0, 128, 0};
}

tern_status tern_beam_search_start(tern_model* m, const int32_t* const* prompts, const size_t* lengths, size_t count,
                                   const tern_beam_options* options) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(options, "options");
    if (count == 0) refuse(TERN_ERROR_INVALID_ARGUMENT, "no prompts to search from");
    need(prompts, "prompts");
    need(lengths, "lengths");
    std::vector<std::vector<int64_t>> rows;
    for (size_t i = 0; i < count; ++i) {
      if (lengths[i] == 0) refuse(TERN_ERROR_INVALID_ARGUMENT, "prompt ", i, " has no tokens");
      rows.push_back(ids_of(m, prompts[i], lengths[i]));
    }
    llm::GenerateOptions o;
    o.num_beams = options->num_beams;
    o.length_penalty = options->length_penalty;
    o.early_stopping = options->early_stopping != 0;
    o.max_new_tokens = options->max_new_tokens;
    o.min_new_tokens = options->min_new_tokens;
    o.eos_token_ids = m->config.eos_token_ids;
    as_argument([&] { m->generator->check_request(rows, o); });
    if (options->num_return_sequences < 1 || options->num_return_sequences > options->num_beams)
      refuse(TERN_ERROR_INVALID_ARGUMENT, "num_return_sequences ", options->num_return_sequences, ": must be 1 to num_beams (",
             options->num_beams, ")");
    reset(m);
    m->beams = std::make_unique<llm::BeamSearch>(*m->generator, std::move(rows), o);
    m->beams_returned = options->num_return_sequences;
  });
}

tern_status tern_beam_search_step(tern_model* m, int* done) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    auto& search = beams_of(m);
    search.step();
    if (done) *done = search.done() ? 1 : 0;
  });
}

tern_status tern_beam_search_tokens(tern_model* m, const int32_t** ids, size_t* count) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(ids, "ids");
    need(count, "count");
    const auto& last = beams_of(m).last_tokens();
    *ids = as_ids(m, last);
    *count = last.size();
  });
}

tern_status tern_beam_search_sequence(tern_model* m, size_t index, const int32_t** ids, size_t* count) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(ids, "ids");
    need(count, "count");
    const auto best = beams_of(m).best(m->beams_returned);
    if (index >= best.size()) refuse(TERN_ERROR_INVALID_ARGUMENT, "sequence ", index, ": the search returns ", best.size());
    *ids = as_ids(m, best[index]);
    *count = best[index].size();
  });
}
