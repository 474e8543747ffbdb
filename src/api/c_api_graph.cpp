// The C API's graphs (tern_graph_*): any ONNX model, run with named tensors, from several threads at once.
#include "api/handles.h"

#include <nlohmann/json.hpp>

namespace tern::api {
namespace {

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

Tensor caller_tensor(const tern_tensor& in, const char* what) {
  if (in.rank < 0 || in.rank > TERN_MAX_DIMS)
    refuse(TERN_ERROR_INVALID_ARGUMENT, what, " '", in.name, "': rank ", in.rank, " (0 to ", TERN_MAX_DIMS, ")");
  Shape shape(in.shape, in.shape + in.rank);
  for (int64_t d : shape)
    if (d < 0) refuse(TERN_ERROR_INVALID_ARGUMENT, what, " '", in.name, "': shape ", shape_str(shape), " has a negative dimension");
  const DType dtype = dtype_from_c(in.dtype, in.name);
  const size_t bytes = bytes_for(dtype, numel_of(shape));
  if (in.bytes != bytes)
    refuse(TERN_ERROR_INVALID_ARGUMENT, what, " '", in.name, "': ", in.bytes, " bytes given, its ", dtype_name(dtype), " shape ",
           shape_str(shape), " has ", bytes);
  if (bytes > 0) need(in.data, "data");
  const size_t align = std::max<size_t>(dtype_size(dtype), 1);  // (4-bit elements: bytes)
  if (reinterpret_cast<uintptr_t>(in.data) % align != 0)
    refuse(TERN_ERROR_INVALID_ARGUMENT, what, " '", in.name, "': data is not aligned to its ", align, "-byte elements");
  // Read in place: no kernel writes its inputs, and none needs more than element alignment from an
  // activation (aligned loads are only of tern's own prepacked panels and scratch).
  return Tensor(dtype, shape, Buffer::view(in.data, bytes, nullptr));
}

}  // namespace tern::api

using namespace tern;
using namespace tern::api;

extern "C" {

tern_status tern_graph_load(const char* onnx_path, const tern_options* options, tern_graph** graph) {
  return create(graph, [&](tern_graph& g) {
    need(onnx_path, "onnx_path");
    SessionOptions so = llm::load_session_options(options ? options->decoder : llm::DecoderOptions{});
    if (options && options->profiling) {
      g.profiler = std::make_unique<Profiler>();
      g.profiler->attach(so);
    }
    if (options) so.fixed_dims = options->fixed_dims, so.initializers = options->initializers;
    const std::string path = model_path(onnx_path);  // (a GGUF: its imported folder, whose graph the resolver names)
    g.session = std::make_unique<Session>(path == onnx_path ? path : llm::resolve_model(path).onnx, so);
    const Model& m = g.session->model();
    g.metadata_json = nlohmann::json{
        {"producer_name", m.producer},
        {"graph_name", m.graph_name},
        {"domain", m.domain},
        {"description", m.description},
        {"graph_description", m.graph_description},
        {"version", m.model_version},
        {"custom_metadata_map",
         m.metadata}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  });
}

const char* tern_graph_metadata(const tern_graph* g) { return g && g->session ? g->metadata_json.c_str() : nullptr; }

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

tern_status tern_graph_run(tern_graph* g, const tern_tensor* inputs, size_t input_count, tern_tensor* outputs, size_t output_count) {
  if (!g) return TERN_ERROR_INVALID_ARGUMENT;
  tern_graph::ThreadSlot& slot = g->slot();
  return guarded(&slot.error, [&] {
    if (!g->session) refuse(TERN_ERROR_INVALID_ARGUMENT, "the graph did not load: ", g->error);
    if (input_count > 0) need(inputs, "inputs");
    if (output_count > 0) need(outputs, "outputs");
    std::vector<std::pair<std::string, Tensor>> feeds;
    for (size_t i = 0; i < input_count; ++i) {
      need(inputs[i].name, "inputs[i].name");
      feeds.emplace_back(inputs[i].name, caller_tensor(inputs[i], "input"));
    }
    slot.outputs = g->session->run(feeds);
    for (size_t i = 0; i < output_count; ++i) {
      tern_tensor& out = outputs[i];
      need(out.name, "outputs[i].name");
      const Tensor& t = slot.outputs.at(out.name);
      if (t.rank() > TERN_MAX_DIMS)
        refuse(TERN_ERROR_UNSUPPORTED, "output '", out.name, "' has rank ", t.rank(), " (the C API carries up to ", TERN_MAX_DIMS, ")");
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

}  // extern "C"
