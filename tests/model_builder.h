// Builds small ONNX models in tests with the protobuf classes, so each test states its graph inline.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace tern::test {

class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 21) {
    m_.set_ir_version(10);
    m_.set_producer_name("tern-tests");
    auto* os = m_.add_opset_import();
    os->set_domain("");
    os->set_version(opset);
    m_.mutable_graph()->set_name("test");
  }
  onnx::ModelProto& proto() { return m_; }
  onnx::GraphProto& graph() { return *m_.mutable_graph(); }

  // dims: >= 0 fixed, -1 symbolic named by `syms` in order.
  ModelBuilder& input(const std::string& name, int elem, const std::vector<int64_t>& dims,
                      const std::vector<std::string>& syms = {}) {
    fill_value_info(graph().add_input(), name, elem, dims, syms);
    return *this;
  }
  ModelBuilder& output(const std::string& name, int elem = 0) {
    auto* vi = graph().add_output();
    vi->set_name(name);
    if (elem) vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& ins, const std::vector<std::string>& outs,
                        const std::string& domain = "") {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(graph().node_size()));
    if (!domain.empty()) n->set_domain(domain);
    for (const auto& i : ins) n->add_input(i);
    for (const auto& o : outs) n->add_output(o);
    return *n;
  }
  onnx::TensorProto& initializer_f32(const std::string& name, const std::vector<int64_t>& dims,
                                     const std::vector<float>& v) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    return *t;
  }
  onnx::TensorProto& initializer_i64(const std::string& name, const std::vector<int64_t>& dims,
                                     const std::vector<int64_t>& v) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
    return *t;
  }
  std::string save(const std::filesystem::path& path) const {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream f(path, std::ios::binary);
    m_.SerializeToOstream(&f);
    return path.string();
  }

  static void fill_value_info(onnx::ValueInfoProto* vi, const std::string& name, int elem,
                              const std::vector<int64_t>& dims, const std::vector<std::string>& syms) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    size_t s = 0;
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d >= 0) dim->set_dim_value(d);
      else dim->set_dim_param(s < syms.size() ? syms[s++] : "");
    }
  }

 private:
  onnx::ModelProto m_;
};

// A fresh empty folder under the system temp dir, removed when the test ends.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("tern-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

}  // namespace tern::test
