// The C API's model helpers, shared by c_api_model.cpp (loading, tokens, chat) and c_api_generate.cpp (sampling,
// steps, generation, text streams, beams).
#pragma once
#include <string>
#include <vector>

#include "api/handles.h"

namespace tern::api {

llm::SamplingOptions sampling_of(const tern_sampling& s);
// The model's own sampling (generation_config.json's, as the CLI and tern serve take it with no flags) as the C struct.
tern_sampling model_sampling(const tern_model& m);
// A sampler for `s`; its range check (llm::Sampler) is the caller's argument error.
llm::Sampler sampler_for(const tern_sampling& s);
std::vector<int64_t> ids_of(const tern_model* m, const int32_t* ids, size_t count);
bool on_ring(const tern_model* m);
// The logits after ids[0 … n) are fed to the ring row (allocation-free), or with the graph's own past.
const Tensor& run_new_tokens(tern_model* m, const int64_t* ids, size_t n);
// A beam search holds the caches: the step API takes them back empty.
void end_beams(tern_model* m);
// Feeds ids[0 … n) after what the sequence holds; the logits of the last become current.
void feed(tern_model* m, const int64_t* ids, size_t n);
int64_t choose_next(tern_model* m);
void reset(tern_model* m);
// Token ids into the caller's ids[0 … capacity); *count gets how many there are.
void copy_ids(const std::vector<int64_t>& out, int32_t* ids, size_t capacity, size_t* count);
// Every ring layer drops the sequence's tokens from `length` on, in place; false when the model has no ring or a
// layer's window has slid (some layers may then have dropped theirs: the caller resets them all).
bool rewind_rings(tern_model* m, size_t length);
// `out` NUL-terminated into text[0 … capacity); *length gets its bytes without the NUL.
void copy_text(const std::string& out, char* text, size_t capacity, size_t* length);
// The C arrays of a conversation, checked: roles "system", "user" or "assistant".
std::vector<llm::ChatMessage> chat_messages(const char* const* roles, const char* const* contents, size_t count);
const llm::Tokenizer& tokenizer_of(const tern_model* m);
// The folder's chat template, read and parsed once (a clone made after that shares it).
const llm::ChatTemplate& chat_of(tern_model* m);
llm::BeamSearch& beams_of(tern_model* m);
// Ids handed out as int32 (the model's scratch, valid until its next call).
const int32_t* as_ids(tern_model* m, const std::vector<int64_t>& ids);

}  // namespace tern::api

// Returns from a C entry point whose model is NULL or did not load, with the error.
#define TERN_LOADED(m)                                                                                  \
  if (!(m)) return TERN_ERROR_INVALID_ARGUMENT;                                                         \
  if (!(m)->session) {                                                                                  \
    return guarded(&(m)->error, [] { refuse(TERN_ERROR_INVALID_ARGUMENT, "the model did not load"); }); \
  }
