// Writes ONNX models with the protobuf classes: used by converters (llama2.c → ONNX), tools that make
// fixtures, and tests that state their graph inline. Reading models is onnx_loader's job.
#pragma once
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/tensor.h"

namespace tern::convert {

// A dimension in a declared input/output shape: a size or a symbol ("batch_size").
using DeclaredDim = std::variant<int64_t, std::string>;

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int default_opset = 21, const std::string& graph_name = "main");
  onnx::ModelProto& proto() { return model_; }
  onnx::GraphProto& graph() { return *model_.mutable_graph(); }
  void add_opset(const std::string& domain, int version);

  OnnxBuilder& input(const std::string& name, DType dtype, const std::vector<DeclaredDim>& dims);
  // An output with a declared type, or with none (dtype Undefined) so inference decides.
  OnnxBuilder& output(const std::string& name, DType dtype = DType::Undefined, const std::vector<DeclaredDim>& dims = {});
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                        const std::string& domain = "");
  // Initializers are stored raw; save() may move large ones to an external data file.
  void initializer(const std::string& name, const Tensor& value);

  static void attr(onnx::NodeProto& n, const std::string& name, int64_t v);
  static void attr(onnx::NodeProto& n, const std::string& name, float v);
  static void attr(onnx::NodeProto& n, const std::string& name, const std::string& v);
  static void attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v);

  // Writes `path`. With `external_data` set, initializers of at least `external_min_bytes` go to that
  // file (next to the model, 64-byte aligned so tern maps them without copying).
  void save(const std::filesystem::path& path, const std::string& external_data = "", size_t external_min_bytes = 1024) const;

 private:
  onnx::ModelProto model_;
};

}  // namespace tern::convert
