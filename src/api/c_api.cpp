// The C API (include/tern/tern.h) over the C++ library: handles own a Session (and for models the
// generator, tokenizer and one sequence's state); every entry point catches what tern throws and turns it
// into a status plus the handle's message. Nothing here decides how a model is loaded or sampled — that is
// llm/model_folder.h's, as for the CLI.
#include "tern/tern.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/isa.h"
#include "llm/chat_template.h"
#include "llm/generator.h"
#include "llm/model_folder.h"
#include "llm/tokenizer.h"
#include "runtime/profiler.h"
#include "runtime/session.h"

#ifndef TERN_VERSION
#error "TERN_VERSION is set by CMakeLists.txt (project VERSION)"
#endif

namespace {

using namespace tern;

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

// The element types a tern_tensor carries (all of tern's but strings).
bool carried(int t) {
  switch (t) {
    case TERN_FLOAT32: case TERN_UINT8: case TERN_INT8: case TERN_UINT16: case TERN_INT16: case TERN_INT32:
    case TERN_INT64: case TERN_BOOL: case TERN_FLOAT16: case TERN_FLOAT64: case TERN_UINT32: case TERN_UINT64:
    case TERN_BFLOAT16: case TERN_UINT4: case TERN_INT4:
      return true;
  }
  return false;
}

DType dtype_from_c(const tern_dtype& field, const std::string& tensor) {
  const int t = raw_value(field);
  if (!carried(t)) refuse(TERN_ERROR_INVALID_ARGUMENT, "tensor '", tensor, "': dtype ", t, " is not a tern_dtype");
  return static_cast<DType>(t);
}

tern_dtype c_dtype(DType t, const std::string& tensor) {
  if (!carried(static_cast<int>(t)))
    refuse(TERN_ERROR_UNSUPPORTED, "output '", tensor, "' has dtype ", dtype_name(t), ", which the C API does not carry");
  return static_cast<tern_dtype>(static_cast<int>(t));
}

}  // namespace

struct tern_options {
  llm::DecoderOptions decoder;  // device, weights, window, threads, memory cap
  std::string isa;
  bool profiling = false;
  std::string error;
};

// A graph's calls may come from several threads at once (as ONNX Runtime's Run): what one call leaves for
// its caller to read — the outputs tern_graph_run points into, the message of a failure — is kept per thread.
struct tern_graph {
  std::string error;  // the load's
  std::unique_ptr<Profiler> profiler;  // before the session, whose hook points at it
  std::unique_ptr<Session> session;
  struct ThreadSlot {
    std::string error;  // this thread's last failure on the graph
    Outputs outputs;    // this thread's last run's (tern_graph_run hands out pointers into them)
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
  llm::ModelConfig config;
  std::shared_ptr<Session> session;  // shared by a model's clones
  std::unique_ptr<llm::Generator> generator;  // this handle's sequence
  std::shared_ptr<const llm::Tokenizer> tokenizer;  // null when the folder has none (tokenizer_missing says why)
  std::string tokenizer_missing;
  // The one sequence: its tokens (all fed), the logits after the last — the generator's, valid until its next
  // run, null before the first — and the sampler's state.
  std::vector<int64_t> tokens;
  const float* logits = nullptr;
  int64_t vocab = 0;
  llm::Sampler sampler{llm::SamplingOptions{}};
  // Generator::run_rows' arguments (one sequence, ring row 0), kept so that a decode step allocates nothing.
  std::vector<std::vector<int64_t>> new_tokens{1};
  std::vector<int64_t> held{0}, ring_rows{0};
  // A model whose attention did not take the ring (GPT-2's past_N, say): the graph's own past, fed back by
  // Generator::extend (null: a graph with no cache, run on the whole sequence each step).
  std::unique_ptr<llm::KvCache> graph_cache;
  std::string text;  // tern_detokenize's result until the next call
};

struct tern_text_stream {
  tern_model* model;
  llm::TextStream stream;
  std::string text;  // the last push's or flush's
};

namespace {

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

void apply_isa(const tern_options* o) {
  if (o && !o->isa.empty()) as_argument([&] { kernels::request_isa(o->isa); });  // a tier this CPU lacks, or not the one in use
}

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
void feed(tern_model* m, const int64_t* ids, size_t n) {
  if (n == 0) return;
  const Tensor& logits = run_new_tokens(m, ids, n);
  m->tokens.insert(m->tokens.end(), ids, ids + n);
  m->logits = logits.data<float>();
  m->vocab = logits.dim(1);
}

int64_t choose_next(tern_model* m) {
  if (!m->logits) refuse(TERN_ERROR_INVALID_ARGUMENT, "no logits yet: prefill the sequence first");
  return m->sampler.next(m->logits, m->vocab, m->tokens);
}

void reset(tern_model* m) {
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

const llm::Tokenizer& tokenizer_of(const tern_model* m) {
  if (!m->tokenizer) refuse(TERN_ERROR_UNSUPPORTED, m->tokenizer_missing);
  return *m->tokenizer;
}

void fill_value_info(const IOInfo& io, tern_value_info* info) {
  need(info, "info");
  info->name = io.name.c_str();
  info->dtype = carried(static_cast<int>(io.dtype)) ? static_cast<tern_dtype>(static_cast<int>(io.dtype)) : TERN_UNDEFINED;
  info->rank = -1;
  std::fill(info->shape, info->shape + TERN_MAX_DIMS, -1);
  std::fill(info->dim_names, info->dim_names + TERN_MAX_DIMS, nullptr);
  if (!io.shape) return;
  if (io.shape->size() > TERN_MAX_DIMS)
    refuse(TERN_ERROR_UNSUPPORTED, "'", io.name, "' has rank ", io.shape->size(), " (the C API carries up to ", TERN_MAX_DIMS, ")");
  info->rank = static_cast<int32_t>(io.shape->size());
  for (size_t d = 0; d < io.shape->size(); ++d) {
    const Dim& dim = (*io.shape)[d];
    info->shape[d] = dim.is_known() ? dim.value : -1;
    if (!dim.is_known() && !dim.symbol.empty()) info->dim_names[d] = dim.symbol.c_str();
  }
}

}  // namespace

extern "C" {

const char* tern_status_name(tern_status status) {
  switch (raw_value(status)) {
    case TERN_OK: return "ok";
    case TERN_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case TERN_ERROR_MODEL: return "model or input error";
    case TERN_ERROR_UNSUPPORTED: return "unsupported";
    case TERN_ERROR_MEMORY_LIMIT: return "memory limit";
    case TERN_ERROR_BUFFER_TOO_SMALL: return "buffer too small";
    case TERN_ERROR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

const char* tern_version(void) { return TERN_VERSION; }

const char* tern_build_info(void) {
  static const std::string info = [] {
    std::string s = std::string("tern ") + TERN_VERSION + "; " +
#if defined(__clang__)
                    "clang " + __clang_version__;
#else
                    "g++ " + __VERSION__;
#endif
    try {
      s += std::string("; CPU kernels ") + kernels::isa_name(kernels::active_isa()) + " (" + kernels::cpu_feature_list() + ")";
    } catch (const std::exception& e) {
      s += std::string("; CPU kernels: ") + e.what();
    }
#ifdef TERN_OPENCL
    s += "; OpenCL";
#else
    s += "; no OpenCL";
#endif
    return s;
  }();
  return info.c_str();
}

tern_options* tern_options_create(void) { return new (std::nothrow) tern_options(); }
void tern_options_free(tern_options* options) { delete options; }
const char* tern_options_error(const tern_options* options) { return options ? options->error.c_str() : "options is NULL"; }

tern_status tern_options_set_threads(tern_options* o, int threads) {
  if (!o) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&o->error, [&] {
    if (threads < 0 || threads > 1024) refuse(TERN_ERROR_INVALID_ARGUMENT, "threads ", threads, " (0 for all cores, up to 1024)");
    o->decoder.threads = threads;
  });
}

tern_status tern_options_set_isa(tern_options* o, const char* isa) {
  if (!o) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&o->error, [&] {
    need(isa, "isa");
    const std::string name = isa;
    if (!kernels::isa_tier_exists(name))
      refuse(TERN_ERROR_INVALID_ARGUMENT, "ISA tier '", name, "' (", kernels::isa_tier_names(", "), ")");
    o->isa = name;
  });
}

tern_status tern_set_process_memory_limit(uint64_t bytes) {
  if (bytes > std::numeric_limits<size_t>::max()) return TERN_ERROR_INVALID_ARGUMENT;
  set_process_memory_limit(static_cast<size_t>(bytes));
  return TERN_OK;
}

tern_status tern_options_set_max_memory(tern_options* o, uint64_t bytes) {
  if (!o) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&o->error, [&] { o->decoder.max_memory = bytes ? std::to_string(bytes) : ""; });
}

tern_status tern_options_set_window(tern_options* o, int64_t tokens) {
  if (!o) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&o->error, [&] {
    if (tokens < 0 || tokens > llm::kMaxContextTokens) refuse(TERN_ERROR_INVALID_ARGUMENT, "window ", tokens, " tokens (0 for the model's context, up to 2^24)");
    if (tokens == 0) o->decoder.window.reset();
    else o->decoder.window = tokens;
  });
}

tern_status tern_options_set_device(tern_options* o, const char* device) {
  if (!o) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&o->error, [&] {
    need(device, "device");
    as_argument([&] { parse_device(device); });  // names the choices when it is none of them
    o->decoder.device = device;
  });
}

tern_status tern_options_set_weights(tern_options* o, const char* format) {
  if (!o) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&o->error, [&] {
    need(format, "weights");
    as_argument([&] { parse_weight_format(format); });
    o->decoder.weights = format;
  });
}

tern_status tern_options_set_profiling(tern_options* o, int on) {
  if (!o) return TERN_ERROR_INVALID_ARGUMENT;
  o->profiling = on != 0;
  return TERN_OK;
}

// ---- graphs ----

tern_status tern_graph_load(const char* onnx_path, const tern_options* options, tern_graph** graph) {
  return create(graph, [&](tern_graph& g) {
    need(onnx_path, "onnx_path");
    apply_isa(options);
    SessionOptions so = llm::load_session_options(options ? options->decoder : llm::DecoderOptions{});
    if (options && options->profiling) {
      g.profiler = std::make_unique<Profiler>();
      g.profiler->attach(so);
    }
    g.session = std::make_unique<Session>(onnx_path, so);
  });
}

void tern_graph_free(tern_graph* graph) { delete graph; }
const char* tern_graph_error(const tern_graph* graph) {
  if (!graph) return "graph is NULL";
  const tern_graph::ThreadSlot& slot = graph->slot();
  return slot.error.empty() ? graph->error.c_str() : slot.error.c_str();
}

size_t tern_graph_input_count(const tern_graph* g) { return g && g->session ? g->session->inputs().size() : 0; }
size_t tern_graph_output_count(const tern_graph* g) { return g && g->session ? g->session->outputs().size() : 0; }
const char* tern_graph_input_name(const tern_graph* g, size_t i) {
  return g && g->session && i < g->session->inputs().size() ? g->session->inputs()[i].name.c_str() : nullptr;
}
const char* tern_graph_output_name(const tern_graph* g, size_t i) {
  return g && g->session && i < g->session->outputs().size() ? g->session->outputs()[i].name.c_str() : nullptr;
}

tern_status tern_graph_input_info(const tern_graph* g, size_t i, tern_value_info* info) {
  if (!g || !g->session || i >= g->session->inputs().size() || !info) return TERN_ERROR_INVALID_ARGUMENT;
  std::string ignored;  // (the graph is const: a rank past TERN_MAX_DIMS is the one failure, said by the status)
  return guarded(&ignored, [&] { fill_value_info(g->session->inputs()[i], info); });
}

tern_status tern_graph_output_info(const tern_graph* g, size_t i, tern_value_info* info) {
  if (!g || !g->session || i >= g->session->outputs().size() || !info) return TERN_ERROR_INVALID_ARGUMENT;
  std::string ignored;
  return guarded(&ignored, [&] { fill_value_info(g->session->outputs()[i], info); });
}

tern_status tern_graph_run(tern_graph* g, const tern_tensor* inputs, size_t input_count, tern_tensor* outputs,
                           size_t output_count) {
  if (!g) return TERN_ERROR_INVALID_ARGUMENT;
  tern_graph::ThreadSlot& slot = g->slot();
  return guarded(&slot.error, [&] {
    if (!g->session) refuse(TERN_ERROR_INVALID_ARGUMENT, "the graph did not load: ", g->error);
    if (input_count > 0) need(inputs, "inputs");
    if (output_count > 0) need(outputs, "outputs");
    std::vector<std::pair<std::string, Tensor>> feeds;
    for (size_t i = 0; i < input_count; ++i) {
      const tern_tensor& in = inputs[i];
      need(in.name, "inputs[i].name");
      if (in.rank < 0 || in.rank > TERN_MAX_DIMS) refuse(TERN_ERROR_INVALID_ARGUMENT, "input '", in.name, "': rank ", in.rank, " (0 to ", TERN_MAX_DIMS, ")");
      Shape shape(in.shape, in.shape + in.rank);
      for (int64_t d : shape)
        if (d < 0) refuse(TERN_ERROR_INVALID_ARGUMENT, "input '", in.name, "': shape ", shape_str(shape), " has a negative dimension");
      const DType dtype = dtype_from_c(in.dtype, in.name);
      const size_t bytes = bytes_for(dtype, numel_of(shape));
      if (in.bytes != bytes)
        refuse(TERN_ERROR_INVALID_ARGUMENT, "input '", in.name, "': ", in.bytes, " bytes given, its ", dtype_name(dtype), " shape ", shape_str(shape), " has ", bytes);
      if (bytes > 0) need(in.data, "input data");
      const size_t align = std::max<size_t>(dtype_size(dtype), 1);  // (4-bit elements: bytes)
      if (reinterpret_cast<uintptr_t>(in.data) % align != 0)
        refuse(TERN_ERROR_INVALID_ARGUMENT, "input '", in.name, "': data is not aligned to its ", align, "-byte elements");
      // Read in place: no kernel writes its inputs, and none needs more than element alignment from an
      // activation (aligned loads are only of tern's own prepacked panels and scratch).
      feeds.emplace_back(in.name, Tensor(dtype, shape, Buffer::view(in.data, bytes, nullptr)));
    }
    slot.outputs = g->session->run(feeds);
    for (size_t i = 0; i < output_count; ++i) {
      tern_tensor& out = outputs[i];
      need(out.name, "outputs[i].name");
      const Tensor& t = slot.outputs.at(out.name);
      if (t.rank() > TERN_MAX_DIMS) refuse(TERN_ERROR_UNSUPPORTED, "output '", out.name, "' has rank ", t.rank(), " (the C API carries up to ", TERN_MAX_DIMS, ")");
      out.dtype = c_dtype(t.dtype(), out.name);
      out.rank = static_cast<int32_t>(t.rank());
      std::copy(t.shape().begin(), t.shape().end(), out.shape);
      if (!out.data) {
        out.data = t.raw();
        out.bytes = t.nbytes();
      } else if (out.bytes < t.nbytes()) {
        out.bytes = t.nbytes();
        refuse(TERN_ERROR_BUFFER_TOO_SMALL, "output '", out.name, "' needs ", t.nbytes(), " bytes");
      } else {
        out.bytes = t.nbytes();
        std::memcpy(out.data, t.raw(), t.nbytes());
      }
    }
  });
}

tern_status tern_graph_profile(tern_graph* g, const tern_node_profile** nodes, size_t* count) {
  if (!g) return TERN_ERROR_INVALID_ARGUMENT;
  tern_graph::ThreadSlot& slot = g->slot();
  return guarded(&slot.error, [&] {
    need(nodes, "nodes");
    need(count, "count");
    if (!g->profiler) refuse(TERN_ERROR_INVALID_ARGUMENT, "the graph was loaded without profiling (tern_options_set_profiling)");
    slot.profile.clear();
    for (const Profiler::Event& e : g->profiler->events())
      slot.profile.push_back({e.name.c_str(), e.op_type.c_str(), e.kernel.c_str(), e.run, e.ts_us, e.dur_us, e.flops, e.bytes});
    *nodes = slot.profile.data();
    *count = slot.profile.size();
  });
}

tern_status tern_graph_profile_clear(tern_graph* g) {
  if (!g) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&g->slot().error, [&] {
    if (!g->profiler) refuse(TERN_ERROR_INVALID_ARGUMENT, "the graph was loaded without profiling (tern_options_set_profiling)");
    g->profiler->clear();
  });
}

tern_status tern_graph_write_profile(tern_graph* g, const char* path) {
  if (!g) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&g->slot().error, [&] {
    need(path, "path");
    if (!g->profiler) refuse(TERN_ERROR_INVALID_ARGUMENT, "the graph was loaded without profiling (tern_options_set_profiling)");
    g->profiler->write_chrome_trace(path);
  });
}

// ---- models ----

tern_status tern_model_load(const char* path, const tern_options* options, tern_model** model) {
  return create(model, [&](tern_model& m) {
    need(path, "path");
    apply_isa(options);
    const llm::ModelFiles files = llm::resolve_model(path);
    m.dir = files.dir;
    m.config = llm::read_model_config(files.dir);
    const llm::DecoderOptions o = options ? options->decoder : llm::DecoderOptions{};
    m.session = std::make_shared<Session>(files.onnx, llm::decoder_session_options(o, m.config, true));
    m.generator = std::make_unique<llm::Generator>(*m.session, m.config);
    reset(&m);
    try {
      m.tokenizer = llm::load_tokenizer(files.dir);
    } catch (const UnsupportedError& e) {  // none (or of a kind tern cannot read): token ids still work
      m.tokenizer_missing = e.what();
    }
    if (m.config.vocab_size <= 0 && m.tokenizer) m.config.vocab_size = m.tokenizer->vocab_size();
    if (m.config.vocab_size <= 0) refuse(TERN_ERROR_MODEL, "'", files.dir, "' gives no vocab_size and has no tokenizer: ", m.tokenizer_missing);
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
    reset(&m);
  });
}

void tern_model_free(tern_model* model) { delete model; }
const char* tern_model_error(const tern_model* model) { return model ? model->error.c_str() : "model is NULL"; }

#define TERN_LOADED(m)                                                                          \
  if (!(m)) return TERN_ERROR_INVALID_ARGUMENT;                                                 \
  if (!(m)->session) {                                                                          \
    return guarded(&(m)->error, [] { refuse(TERN_ERROR_INVALID_ARGUMENT, "the model did not load"); }); \
  }

tern_status tern_model_get_info(const tern_model* m, tern_model_info* info) {
  if (!m || !m->session || !info) return TERN_ERROR_INVALID_ARGUMENT;
  std::string ignored;
  return guarded(&ignored, [&] {
    info->vocab_size = m->config.vocab_size;
    info->context_length = m->config.context_length;
    info->window = m->session->options().kv_window;
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

tern_status tern_chat_tokenize(tern_model* m, const char* const* roles, const char* const* contents, size_t message_count,
                               int32_t* ids, size_t capacity, size_t* count) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(count, "count");
    if (capacity > 0) need(ids, "ids");
    if (message_count > 0) need(roles, "roles"), need(contents, "contents");
    std::vector<llm::ChatMessage> messages;
    for (size_t i = 0; i < message_count; ++i) {
      need(roles[i], "roles[i]");
      need(contents[i], "contents[i]");
      const std::string role = roles[i];
      if (role != "system" && role != "user" && role != "assistant")
        refuse(TERN_ERROR_INVALID_ARGUMENT, "message ", i, ": role '", role, "' (system, user or assistant)");
      messages.push_back({role, contents[i]});
    }
    copy_ids(llm::encode_chat(tokenizer_of(m), llm::detect_chat_family(m->dir), messages), ids, capacity, count);
  });
}

tern_status tern_detokenize(tern_model* m, const int32_t* ids, size_t count, char* text, size_t capacity, size_t* length) {
  TERN_LOADED(m);
  return guarded(&m->error, [&] {
    need(length, "length");
    if (capacity > 0) need(text, "text");
    m->text = tokenizer_of(m).decode(ids_of(m, ids, count));
    *length = m->text.size();
    if (m->text.size() + 1 > capacity) {
      if (capacity > 0) text[0] = '\0';
      refuse(TERN_ERROR_BUFFER_TOO_SMALL, "the text is ", m->text.size(), " bytes and its NUL; text holds ", capacity);
    }
    std::memcpy(text, m->text.c_str(), m->text.size() + 1);
  });
}

void tern_sampling_default(tern_sampling* s) {
  if (!s) return;
  *s = tern_sampling{0.0f, 0, 1.0f, 0.0f, 1.0f, 0};
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
    tern_sampling greedy;
    tern_sampling_default(&greedy);
    m->sampler = sampler_for(p.sampling ? *p.sampling : greedy);
    const llm::Tokenizer& tok = tokenizer_of(m);
    const std::vector<int64_t> ids =
        p.chat ? llm::encode_chat(tok, llm::detect_chat_family(m->dir), {{"user", prompt}}) : tok.encode(prompt, true);
    llm::GenerateOptions check;
    check.max_new_tokens = p.max_new_tokens;
    m->generator->check_request({ids}, check);  // a prompt past the context, ids outside the vocabulary
    reset(m);
    feed(m, ids.data(), ids.size());
    llm::TextStream text(tok, ids);
    llm::StopScanner stop(stops);
    bool more = true;
    auto deliver = [&](const std::string& piece) {
      if (more && !piece.empty() && on_text) more = on_text(piece.data(), piece.size(), user_data) == 0;
    };
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
