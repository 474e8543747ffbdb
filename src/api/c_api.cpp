// The C API (include/tern/tern.h) over the C++ library: handles own a Session (and for models the
// generator, tokenizer and one sequence's state); every entry point catches what tern throws and turns it
// into a status plus the handle's message. Nothing here decides how a model is loaded or sampled — that is
// llm/model_folder.h's, as for the CLI.
#include "api/handles.h"

#include <filesystem>

#include "kernels/kv_storage.h"

#ifndef TERN_MINIMAL
#include "convert/gguf_import.h"
#endif

#ifndef TERN_VERSION
#error "TERN_VERSION and TERN_COMMIT are set by CMakeLists.txt (project VERSION, git describe)"
#endif

namespace tern::api {

bool carried(int t) {
  switch (t) {
    case TERN_FLOAT32:
    case TERN_UINT8:
    case TERN_INT8:
    case TERN_UINT16:
    case TERN_INT16:
    case TERN_INT32:
    case TERN_INT64:
    case TERN_BOOL:
    case TERN_FLOAT16:
    case TERN_FLOAT64:
    case TERN_UINT32:
    case TERN_UINT64:
    case TERN_BFLOAT16:
    case TERN_UINT4:
    case TERN_INT4: return true;
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

std::string model_path(const char* path) {
  if (std::filesystem::path(path).extension() != ".gguf" || !std::filesystem::is_regular_file(path)) return path;
#ifdef TERN_MINIMAL
  fail_unsupported("'", path, "' is a GGUF file, and this build (TERN_MINIMAL) has no importer: `tern import-gguf ", path,
                   " DIR` with a full build makes the folder to load");
#else
  return convert::gguf_model_folder(path);
#endif
}

}  // namespace tern::api

using namespace tern;
using namespace tern::api;

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
    std::string s = std::string("tern ") + TERN_VERSION + " (commit " + TERN_COMMIT + "); " +
#if defined(__clang__)
                    "clang " + __clang_version__;
#else
                    "g++ " + __VERSION__;
#endif
    try {
      s += std::string("; CPU kernels ") + kernels::isa_name(kernels::default_isa()) + " (" + kernels::cpu_feature_list() + ")";
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
    if (!kernels::isa_tier_exists(name)) refuse(TERN_ERROR_INVALID_ARGUMENT, "ISA tier '", name, "' (", kernels::isa_tier_names(", "), ")");
    as_argument([&] { kernels::isa_named(name); });  // (a tier this CPU cannot run)
    o->decoder.isa = name;
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
    if (tokens < 0 || tokens > llm::kMaxContextTokens)
      refuse(TERN_ERROR_INVALID_ARGUMENT, "window ", tokens, " tokens (0 for the model's context, up to 2^24)");
    if (tokens == 0) o->decoder.ring_capacity.reset();
    else o->decoder.ring_capacity = tokens;
  });
}

tern_status tern_options_set_kv_dtype(tern_options* o, const char* kv_dtype) {
  if (!o) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&o->error, [&] {
    need(kv_dtype, "kv_dtype");
    if (!kernels::kv_storage_named(kv_dtype))
      refuse(TERN_ERROR_INVALID_ARGUMENT, "kv_dtype '", kv_dtype, "' (", kernels::kv_storage_names(), ")");
    o->decoder.kv_dtype = kv_dtype;
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

tern_status tern_options_set_dtype(tern_options* o, const char* dtype) {
  if (!o) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&o->error, [&] {
    need(dtype, "dtype");
    o->dtype = dtype;
  });
}

tern_status tern_options_set_profiling(tern_options* o, int on) {
  if (!o) return TERN_ERROR_INVALID_ARGUMENT;
  o->profiling = on != 0;
  return TERN_OK;
}

tern_status tern_options_set_dim(tern_options* o, const char* name, int64_t value) {
  if (!o) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&o->error, [&] {
    need(name, "name");
    if (value < 0) refuse(TERN_ERROR_INVALID_ARGUMENT, "dim '", name, "': ", value, " (at least 0)");
    o->fixed_dims[name] = value;
  });
}

tern_status tern_options_add_initializer(tern_options* o, const tern_tensor* tensor) {
  if (!o) return TERN_ERROR_INVALID_ARGUMENT;
  return guarded(&o->error, [&] {
    need(tensor, "tensor");
    need(tensor->name, "tensor->name");
    o->initializers.emplace_back(tensor->name, caller_tensor(*tensor, "initializer"));
  });
}

}  // extern "C"
