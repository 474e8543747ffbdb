// What the C API's files share (src/api): the handles behind include/tern/tern.h's opaque types, and how an entry
// point turns what tern throws into a status and a message.
#pragma once
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/isa.h"
#include "llm/beam_search.h"
#include "llm/chat_template.h"
#include "llm/draft_model.h"
#include "llm/generator.h"
#include "llm/json_constraint.h"
#include "llm/model_folder.h"
#include "llm/tokenizer.h"
#include "runtime/profiler.h"
#include "runtime/session.h"
#include "tern/tern.h"

namespace tern::api {

// A failure the API itself finds (a NULL pointer, a buffer too small), with its status.
struct ApiError : Error {
  tern_status status;
  ApiError(tern_status s, const std::string& message) : Error(message), status(s) {}
};

template <typename... Args>
[[noreturn]] void refuse(tern_status status, const Args&... args) {
  throw ApiError(status, detail::concat(args...));
}

template <typename T>
void need(const T* p, const char* what) {
  if (!p) refuse(TERN_ERROR_INVALID_ARGUMENT, what, " is NULL");
}

// Runs `body`, mapping whatever it throws to a status and `error` (the handle's message).
template <typename Body>
tern_status guarded(std::string* error, Body&& body) {
  tern_status status = TERN_OK;
  std::string message;
  try {
    body();
    return TERN_OK;
  } catch (const ApiError& e) {
    status = e.status, message = e.what();
  } catch (const UnsupportedError& e) {
    status = TERN_ERROR_UNSUPPORTED, message = e.what();
  } catch (const MemoryLimitError& e) {
    status = TERN_ERROR_MEMORY_LIMIT, message = e.what();
  } catch (const InvalidInputError& e) {
    status = TERN_ERROR_INVALID_ARGUMENT, message = e.what();
  } catch (const Error& e) {
    status = TERN_ERROR_MODEL, message = e.what();
  } catch (const std::bad_alloc&) {
    status = TERN_ERROR_MEMORY_LIMIT, message = "out of memory";
  } catch (const std::exception& e) {
    status = TERN_ERROR_INTERNAL, message = e.what();
  } catch (...) {
    status = TERN_ERROR_INTERNAL, message = "an unknown exception";
  }
  if (error) {
    try {
      *error = message;
    } catch (...) {  // no memory for the message: the status still says what happened
    }
  }
  return status;
}

// The integer a caller put in an enum field or argument, read without an enum-typed load: C lets any int
// through, and in C++ a value outside the enumerators' range is undefined (UBSan stops on it).
template <typename Enum>
int raw_value(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized here");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// The element types a tern_tensor carries (all of tern's but strings), and the conversions that check them.
bool carried(int t);
DType dtype_from_c(const tern_dtype& field, const std::string& tensor);
// A caller's tensor (a run's input, an initializer), checked — rank, shape, dtype, bytes, element alignment — and
// viewed in place; `what` names it in the refusals ("input", "initializer").
Tensor caller_tensor(const tern_tensor& t, const char* what);
tern_dtype c_dtype(DType t, const std::string& tensor);

}  // namespace tern::api

struct tern_options {
  tern::llm::DecoderOptions decoder;  // device, weights, window, threads, ISA tier, memory cap
  std::string dtype;                  // a repository's variant (llm::resolve_model)
  bool profiling = false;
  // (graphs only) SessionOptions::fixed_dims and initializers: tern_options_set_dim, tern_options_add_initializer
  std::map<std::string, int64_t> fixed_dims;
  std::vector<std::pair<std::string, tern::Tensor>> initializers;
  std::string error;
};

// A graph's calls may come from several threads at once (as ONNX Runtime's Run): what one call leaves for
// its caller to read — the outputs tern_graph_run points into, the message of a failure — is kept per thread.
struct tern_graph {
  std::string error;                         // the load's
  std::unique_ptr<tern::Profiler> profiler;  // before the session, whose hook points at it
  std::unique_ptr<tern::Session> session;
  std::string metadata_json;  // tern_graph_metadata's, made at load
  struct ThreadSlot {
    std::string error;                       // this thread's last failure on the graph
    tern::Outputs outputs;                   // this thread's last run's (tern_graph_run hands out pointers into them)
    std::vector<tern_node_profile> profile;  // tern_graph_profile's, pointing into profiler's events
  };
  mutable std::mutex slots_mutex;
  mutable std::map<std::thread::id, ThreadSlot> slots;  // (a map: a slot stays where it is while others are added)
  ThreadSlot& slot() const {
    std::lock_guard<std::mutex> lock(slots_mutex);
    return slots[std::this_thread::get_id()];
  }
};

// A model handle is one sequence; tern_model_clone makes another on the same session (weights loaded once).
struct tern_model {
  std::string error;
  std::string dir;
  tern::llm::ModelConfig config;
  std::shared_ptr<tern::Session> session;                 // shared by a model's clones
  std::unique_ptr<tern::llm::Generator> generator;        // this handle's sequence
  std::shared_ptr<const tern::llm::Tokenizer> tokenizer;  // null when the folder has none (tokenizer_missing says why)
  std::string tokenizer_missing;
  std::shared_ptr<const tern::llm::ChatTemplate> chat;  // the folder's, read at the first chat call (chat_of)
  // tern_model_set_json_schema's constraint on the steps that follow (its vocabulary made once, shared by clones).
  std::shared_ptr<const tern::llm::JsonVocabulary> json_vocabulary;
  std::shared_ptr<const tern::llm::JsonSchema> json_schema;
  std::unique_ptr<tern::llm::JsonConstraint> constraint;
  int64_t constraint_left = 0;  // tokens it may still take (INT64_MAX / 2: no limit)
  std::vector<float> masked;
  // The one sequence: its tokens (all fed), the logits after the last — the generator's, valid until its next
  // run, null before the first — and the sampler's state.
  std::vector<int64_t> tokens;
  const float* logits = nullptr;
  int64_t vocab = 0;
  tern::llm::Sampler sampler{tern::llm::SamplingOptions{}};
  std::vector<float> own_logits;  // what tern_model_set_logits put in place of the run's (logits points here)
  // Generator::run_rows' arguments (one sequence, ring row 0), kept so that a decode step allocates nothing.
  std::vector<std::vector<int64_t>> new_tokens{1};
  std::vector<int64_t> held{0}, ring_rows{0};
  // A model whose attention did not take the ring (GPT-2's past_N, say): the graph's own past, fed back by
  // Generator::extend (null: a graph with no cache, run on the whole sequence each step).
  std::unique_ptr<tern::llm::KvCache> graph_cache;
  std::string text;  // tern_detokenize's result until the next call
  // tern_model_set_speculation's: tern_generate's drafts, and the draft model's session (shared, so the draft's
  // handle may be freed first) with the DraftModel on it (its own sequence).
  tern::llm::SpeculationOptions speculation;
  std::shared_ptr<tern::Session> draft_session;
  std::unique_ptr<tern::llm::DraftModel> draft;
  // A beam search on this handle's caches (tern_beam_search_*), its sequences per prompt, and the ids last handed out.
  std::unique_ptr<tern::llm::BeamSearch> beams;
  int64_t beams_returned = 1;
  std::vector<int32_t> beam_ids;
};

struct tern_text_stream {
  tern_model* model;
  tern::llm::TextStream stream;
  std::string text;  // the last push's or flush's
};

namespace tern::api {

// A handle made with its error slot, then `body(handle)` run guarded: a failure leaves the handle holding
// its message (only running out of memory for the handle itself returns none).
template <typename Handle, typename Body>
tern_status create(Handle** out, Body&& body) {
  if (!out) return TERN_ERROR_INVALID_ARGUMENT;
  *out = new (std::nothrow) Handle();
  if (!*out) return TERN_ERROR_MEMORY_LIMIT;
  Handle* h = *out;
  return guarded(&h->error, [&] { body(*h); });
}

// Runs `check`, whose failure (tern's message) is the caller's argument error.
template <typename Check>
void as_argument(Check&& check) {
  try {
    check();
  } catch (const Error& e) {
    refuse(TERN_ERROR_INVALID_ARGUMENT, e.what());
  }
}

// A path as loads take it: a .gguf file becomes its model folder, imported once into tern's cache
// (convert::gguf_model_folder, as the CLI does); a minimal build, which has no importer, says what to run.
std::string model_path(const char* path);

}  // namespace tern::api
