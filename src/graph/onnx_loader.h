// ONNX protobuf → tern::Graph. The only place that includes the onnx protobuf headers.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "graph/ir.h"

namespace onnx {
class ModelProto;
}

namespace tern {

struct Model {
  std::string path;                                   // the .onnx file
  std::string dir;                                    // the folder external data must stay inside
  std::vector<std::string> external_files;            // the external data files the initializers are mapped from
  std::vector<std::shared_ptr<MappedFile>> mappings;  // the files tensors view (MappedFile::check after each run)
  int64_t ir_version = 0;
  // What the file says of itself (ModelProto's and its graph's): onnxruntime's get_modelmeta() reports them.
  std::string producer, domain, description, graph_name, graph_description;
  int64_t model_version = 0;
  std::map<std::string, std::string> metadata;  // metadata_props
  std::shared_ptr<Graph> graph;
};

struct LoadOptions {
  // Tensors of kMisalignedViewBytes or more whose bytes in a file are not aligned for their type (most inside a
  // single-file model.onnx: protobuf places raw_data anywhere) stay views of the mapping instead of copies.
  // Only byte-wise readers may read them (core/tensor.h: is_aligned, aligned): Session makes aligned copies
  // for every other reader, one node at a time as it prepares them.
  bool misaligned_views = false;
};
constexpr size_t kMisalignedViewBytes = 64 * 1024;

// Parses `path`, loads initializers (external data mmapped from the model's folder) and sorts nodes.
Model load_onnx(const std::string& path, const LoadOptions& options = {});
// A model already parsed (OnnxBuilder's, in memory); `path` names it in messages, and its folder is where
// external data would have to be.
Model load_onnx(const onnx::ModelProto& proto, const std::string& path);

// The protobuf itself (initializers left as stored), for tools that rewrite models.
void read_model_proto(const std::string& path, onnx::ModelProto& out);

// A single serialized TensorProto (the ONNX test-data layout: input_0.pb, output_0.pb, ...).
Tensor load_tensor_pb(const std::string& path, std::string* name = nullptr);
void save_tensor_pb(const Tensor& t, const std::string& name, const std::string& path);

}  // namespace tern
