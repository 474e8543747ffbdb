// The C API's models (tern_model_*: loading, cloning, tokenizing, chat templates): a decoder folder as one sequence;
// its generation is c_api_generate.cpp's.
#include "api/model_helpers.h"

#include <chrono>
#include <filesystem>

#include "llm/openai_api.h"

namespace tern::api {

llm::SamplingOptions sampling_of(const tern_sampling& s) {
  llm::SamplingOptions o;
  o.greedy = s.temperature == 0.0f;
  o.temperature = o.greedy ? 1.0f : s.temperature;
  o.top_k = s.top_k;
  o.top_p = s.top_p;
  o.min_p = s.min_p;
  o.repetition_penalty = s.repetition_penalty;
  o.seed = s.seed;
  return o;
}

// The model's own sampling (generation_config.json's, as the CLI and tern serve take it with no flags) as the C struct.
tern_sampling model_sampling(const tern_model& m) {
  const llm::SamplingOptions o = llm::sampling_options({}, m.config);
  return tern_sampling{o.greedy ? 0.0f : o.temperature, o.top_k, o.top_p, o.min_p, o.repetition_penalty, o.seed};
}

// A sampler for `s`; its range check (llm::Sampler) is the caller's argument error.
llm::Sampler sampler_for(const tern_sampling& s) {
  std::optional<llm::Sampler> sampler;
  as_argument([&] { sampler.emplace(sampling_of(s)); });
  return std::move(*sampler);
}

std::vector<int64_t> ids_of(const tern_model* m, const int32_t* ids, size_t count) {
  if (count > 0) need(ids, "ids");
  std::vector<int64_t> out(ids, ids + count);
  const int64_t V = m->config.vocab_size;
  for (size_t i = 0; i < count; ++i)
    if (out[i] < 0 || (V > 0 && out[i] >= V))
      refuse(TERN_ERROR_INVALID_ARGUMENT, "token id ", out[i], " at index ", i, " is outside the vocabulary (0 to ", V - 1, ")");
  return out;
}

bool on_ring(const tern_model* m) { return m->generator->io().layout == llm::PastLayout::Internal; }

// The logits after ids[0 … n) are fed to the ring row (allocation-free), or with the graph's own past.
const Tensor& run_new_tokens(tern_model* m, const int64_t* ids, size_t n) {
  if (on_ring(m)) {
    m->new_tokens[0].assign(ids, ids + n);
    m->held[0] = static_cast<int64_t>(m->tokens.size());
    return m->generator->run_rows(m->new_tokens, m->held, m->ring_rows, 1);
  }
  std::vector<int64_t> all(m->tokens);
  all.insert(all.end(), ids, ids + n);
  return m->generator->extend(all, m->graph_cache.get());
}

// Feeds ids[0 … n) after what the sequence holds; the logits of the last become current.
// A beam search holds the caches: the step API takes them back empty.
void end_beams(tern_model* m) {
  if (!m->beams) return;
  m->beams.reset();
  m->generator->sequence().reset();
  m->tokens.clear();
  m->logits = nullptr;
}

void feed(tern_model* m, const int64_t* ids, size_t n) {
  end_beams(m);
  if (n == 0) return;
  const Tensor& logits = run_new_tokens(m, ids, n);
  m->tokens.insert(m->tokens.end(), ids, ids + n);
  m->logits = logits.data<float>();
  m->vocab = logits.dim(1);
}

int64_t choose_next(tern_model* m) {
  if (!m->logits) refuse(TERN_ERROR_INVALID_ARGUMENT, "no logits yet: prefill the sequence first");
  if (!m->constraint) return m->sampler.next(m->logits, m->vocab, m->tokens);
  if (m->constraint->complete()) refuse(TERN_ERROR_INVALID_ARGUMENT, "the JSON object is whole (tern_model_constraint_done)");
  m->masked.assign(m->logits, m->logits + m->vocab);
  if (m->constraint->mask(m->masked.data(), m->vocab, m->constraint_left) == 0)
    refuse(TERN_ERROR_INVALID_ARGUMENT, "no token continues the JSON object within its max_tokens");
  const int64_t next = m->sampler.next(m->masked.data(), m->vocab, m->tokens);
  m->constraint->accept(next);
  --m->constraint_left;
  return next;
}

void reset(tern_model* m) {
  end_beams(m);
  if (on_ring(m)) m->generator->sequence().reset_row(0);
  else if (m->generator->io().layout != llm::PastLayout::None) m->graph_cache = std::make_unique<llm::KvCache>(m->generator->io(), 1);
  m->tokens.clear();
  m->logits = nullptr;
}

// Token ids into the caller's ids[0 … capacity); *count gets how many there are.
void copy_ids(const std::vector<int64_t>& out, int32_t* ids, size_t capacity, size_t* count) {
  *count = out.size();
  const size_t n = std::min(capacity, out.size());
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(out[i]);
  if (out.size() > capacity) refuse(TERN_ERROR_BUFFER_TOO_SMALL, "the text makes ", out.size(), " tokens; ids holds ", capacity);
}

// Every ring layer drops the sequence's tokens from `length` on, in place; false when the model has no ring or a
// layer's window has slid (some layers may then have dropped theirs: the caller resets them all).
bool rewind_rings(tern_model* m, size_t length) {
  if (!on_ring(m)) return false;
  try {
    m->generator->sequence().keep_prefix(0, static_cast<int64_t>(length));
  } catch (const Error&) {
    return false;
  }
  return true;
}

// `out` NUL-terminated into text[0 … capacity); *length gets its bytes without the NUL.
void copy_text(const std::string& out, char* text, size_t capacity, size_t* length) {
  *length = out.size();
  if (out.size() + 1 > capacity) {
    if (capacity > 0) text[0] = '\0';
    refuse(TERN_ERROR_BUFFER_TOO_SMALL, "the text is ", out.size(), " bytes and its NUL; text holds ", capacity);
  }
  std::memcpy(text, out.c_str(), out.size() + 1);
}

// The C arrays of a conversation, checked: roles "system", "user" or "assistant".
std::vector<llm::ChatMessage> chat_messages(const char* const* roles, const char* const* contents, size_t count) {
  if (count > 0) need(roles, "roles"), need(contents, "contents");
  std::vector<llm::ChatMessage> messages;
  for (size_t i = 0; i < count; ++i) {
    need(roles[i], "roles[i]");
    need(contents[i], "contents[i]");
    const std::string role = roles[i];
    if (role != "system" && role != "user" && role != "assistant")
      refuse(TERN_ERROR_INVALID_ARGUMENT, "message ", i, ": role '", role, "' (system, user or assistant)");
    messages.push_back({role, contents[i]});
  }
  return messages;
}

const llm::Tokenizer& tokenizer_of(const tern_model* m) {
  if (!m->tokenizer) refuse(TERN_ERROR_UNSUPPORTED, m->tokenizer_missing);
  return *m->tokenizer;
}

// The folder's chat template, read and parsed once (a clone made after that shares it).
const llm::ChatTemplate& chat_of(tern_model* m) {
  if (!m->chat) m->chat = std::make_shared<const llm::ChatTemplate>(llm::ChatTemplate::load(m->dir));
  return *m->chat;
}

llm::BeamSearch& beams_of(tern_model* m) {
  if (!m->beams) refuse(TERN_ERROR_INVALID_ARGUMENT, "no beam search: tern_beam_search_start first");
  return *m->beams;
}

// Ids handed out as int32 (the model's scratch, valid until its next call).
const int32_t* as_ids(tern_model* m, const std::vector<int64_t>& ids) {
  m->beam_ids.assign(ids.begin(), ids.end());
  return m->beam_ids.data();
}

}  // namespace tern::api

using namespace tern;
using namespace tern::api;

extern "C" {

tern_status tern_model_load(const char* path, const tern_options* options, tern_model** model) {
  return create(model, [&](tern_model& m) {
    need(path, "path");
    const llm::ModelFiles files = llm::resolve_model(model_path(path), options ? options->dtype : "");
    m.dir = files.dir;
    m.config = llm::read_model_config(files.dir);
    const llm::DecoderOptions o = options ? options->decoder : llm::DecoderOptions{};
    m.session = std::make_shared<Session>(files.onnx, llm::decoder_session_options(o, m.config, true));
    m.generator = std::make_unique<llm::Generator>(*m.session, m.config);
    m.sampler = sampler_for(model_sampling(m));
    reset(&m);
    try {
      m.tokenizer = llm::load_tokenizer(files.dir);
    } catch (const UnsupportedError& e) {  // none (or of a kind tern cannot read): token ids still work
      m.tokenizer_missing = e.what();
    }
    if (m.config.vocab_size <= 0 && m.tokenizer) m.config.vocab_size = m.tokenizer->vocab_size();
    if (m.config.vocab_size <= 0)
      refuse(TERN_ERROR_MODEL, "'", files.dir, "' gives no vocab_size and has no tokenizer: ", m.tokenizer_missing);
  });
}

tern_status tern_model_clone(const tern_model* model, tern_model** copy) {
  if (!model || !model->session) return TERN_ERROR_INVALID_ARGUMENT;
  return create(copy, [&](tern_model& m) {
    m.dir = model->dir;
    m.config = model->config;
    m.session = model->session;
    m.generator = std::make_unique<llm::Generator>(*m.session, m.config);
    m.tokenizer = model->tokenizer;
    m.tokenizer_missing = model->tokenizer_missing;
    m.chat = model->chat;
    m.json_vocabulary = model->json_vocabulary;
    m.sampler = sampler_for(model_sampling(m));
    reset(&m);
  });
}

void tern_model_free(tern_model* model) { delete model; }
const char* tern_model_error(const tern_model* model) { return model ? model->error.c_str() : "model is NULL"; }

tern_status tern_model_get_info(const tern_model* m, tern_model_info* info) {
  if (!m || !m->session || !info) return TERN_ERROR_INVALID_ARGUMENT;
  std::string ignored;
  return guarded(&ignored, [&] {
    info->vocab_size = m->config.vocab_size;
    info->context_length = m->config.context_length;
    info->window = m->session->options().decoder.ring_capacity;
    const auto bos = m->tokenizer ? m->tokenizer->encode("", true) : std::vector<int64_t>{};
    info->bos_token_id = bos.empty() ? -1 : bos[0];
    info->eos_token_id = m->config.eos_token_ids.empty() ? -1 : m->config.eos_token_ids[0];
  });
}

tern_status tern_tokenize(tern_model* m, const char* text, int add_bos, int32_t* ids, size_t capacity, size_t* count) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(text, "text");
    need(count, "count");
    if (capacity > 0) need(ids, "ids");
    copy_ids(tokenizer_of(m).encode(text, add_bos != 0), ids, capacity, count);
  });
}

tern_status tern_chat_tokenize(tern_model* m, const char* const* roles, const char* const* contents, size_t message_count, int32_t* ids,
                               size_t capacity, size_t* count) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(count, "count");
    if (capacity > 0) need(ids, "ids");
    copy_ids(llm::encode_chat(tokenizer_of(m), chat_of(m), chat_messages(roles, contents, message_count)), ids, capacity, count);
  });
}

tern_status tern_detokenize(tern_model* m, const int32_t* ids, size_t count, char* text, size_t capacity, size_t* length) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(length, "length");
    if (capacity > 0) need(text, "text");
    m->text = tokenizer_of(m).decode(ids_of(m, ids, count));
    copy_text(m->text, text, capacity, length);
  });
}

tern_status tern_token_id(tern_model* m, const char* piece, int32_t* id) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(piece, "piece");
    need(id, "id");
    const int64_t found = tokenizer_of(m).piece_id(piece);
    if (found < 0) refuse(TERN_ERROR_INVALID_ARGUMENT, "'", piece, "' is not in the vocabulary");
    *id = static_cast<int32_t>(found);
  });
}

tern_status tern_chat_render(tern_model* m, const char* messages_json, const char* tools_json, const char* template_source,
                             int add_generation_prompt, char* text, size_t capacity, size_t* length) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(messages_json, "messages_json");
    need(length, "length");
    if (capacity > 0) need(text, "text");
    const auto messages = nlohmann::ordered_json::parse(messages_json, nullptr, false);
    if (messages.is_discarded() || !messages.is_array()) refuse(TERN_ERROR_INVALID_ARGUMENT, "messages_json is not a JSON array");
    llm::ChatOptions o;
    o.add_generation_prompt = add_generation_prompt != 0;
    if (tools_json && *tools_json) {
      o.tools = nlohmann::ordered_json::parse(tools_json, nullptr, false);
      if (o.tools.is_discarded() || !o.tools.is_array()) refuse(TERN_ERROR_INVALID_ARGUMENT, "tools_json is not a JSON array");
    }
    try {
      llm::ChatTemplate given;  // (a template of the caller's, with the model's special tokens)
      if (template_source && *template_source) given = chat_of(m).with_source(template_source);
      const llm::ChatTemplate& own = given.empty() ? chat_of(m) : given;
      if (own.empty()) refuse(TERN_ERROR_UNSUPPORTED, "'", m->dir, "' has no chat template: pass one (template_source)");
      m->text = own.render(messages, o);
    } catch (const ApiError&) {
      throw;
    } catch (const UnsupportedError&) {
      throw;
    } catch (const Error& e) {  // (the template's: its syntax, a type error, its raise_exception)
      refuse(TERN_ERROR_INVALID_ARGUMENT, e.what());
    }
    copy_text(m->text, text, capacity, length);
  });
}

tern_status tern_chat_format(tern_model* m, const char* const* roles, const char* const* contents, size_t message_count, char* text,
                             size_t capacity, size_t* length) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(length, "length");
    if (capacity > 0) need(text, "text");
    const llm::ChatTemplate& chat = chat_of(m);
    if (chat.empty()) refuse(TERN_ERROR_UNSUPPORTED, "'", m->dir, "' has no chat template (tern_chat_tokenize writes one running text)");
    m->text = chat.render(chat_messages(roles, contents, message_count));
    copy_text(m->text, text, capacity, length);
  });
}

}  // extern "C"
