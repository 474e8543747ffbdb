// Builds small ONNX models in tests with the protobuf classes, so each test states its graph inline.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "convert/onnx_builder.h"

namespace tern::test {

// OnnxBuilder with the shorthands tests use: ONNX element-type numbers, -1 for symbolic dims, and
// initializers in the typed fields (float_data/int64_data) so those decoders are exercised too.
class ModelBuilder : public convert::OnnxBuilder {
 public:
  explicit ModelBuilder(int opset = 21) : OnnxBuilder(opset, "test") {}

  // dims: >= 0 fixed, -1 symbolic named by `syms` in order.
  ModelBuilder& input(const std::string& name, int elem, const std::vector<int64_t>& dims, const std::vector<std::string>& syms = {}) {
    std::vector<convert::DeclaredDim> d;
    size_t s = 0;
    for (int64_t x : dims) {
      if (x >= 0) d.emplace_back(x);
      else d.emplace_back(s < syms.size() ? syms[s++] : std::string());
    }
    OnnxBuilder::input(name, static_cast<DType>(elem), d);
    return *this;
  }
  ModelBuilder& output(const std::string& name, int elem = 0) {
    OnnxBuilder::output(name, static_cast<DType>(elem));
    return *this;
  }
  onnx::TensorProto& initializer_f32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    auto* t = typed_initializer(name, onnx::TensorProto::FLOAT, dims);
    for (float x : v) t->add_float_data(x);
    return *t;
  }
  onnx::TensorProto& initializer_i64(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
    auto* t = typed_initializer(name, onnx::TensorProto::INT64, dims);
    for (int64_t x : v) t->add_int64_data(x);
    return *t;
  }
  std::string save(const std::filesystem::path& path) const {
    OnnxBuilder::save(path);
    return path.string();
  }

 private:
  onnx::TensorProto* typed_initializer(const std::string& name, int dt, const std::vector<int64_t>& dims) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(dt);
    for (int64_t d : dims) t->add_dims(d);
    return t;
  }
};

// y = x · w, x [1, 1024] (`any_rows`: [rows, 1024]), w a 1024×1024 float32 initializer of (i mod 7) − 3 — 4 MiB
// read at load and 4 MiB more repacked: the memory-cap tests' model. Returns the file's path; `w` gets the weight.
inline std::string write_matmul_1024_model(const std::filesystem::path& path, std::vector<float>& w, bool any_rows = false) {
  ModelBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {any_rows ? -1 : 1, 1024}, {"rows"}).output("y");
  w.resize(1024 * 1024);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) - 3.0f;
  b.initializer_f32("w", {1024, 1024}, w);
  b.node("MatMul", {"x", "w"}, {"y"});
  return b.save(path);
}

// A fresh empty folder under the system temp dir, removed when the test ends.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() / ("tern-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
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
