#include "convert/onnx_builder.h"

#include "core/output_files.h"

namespace tern::convert {

namespace {
void fill_type(onnx::ValueInfoProto* vi, DType dtype, const std::vector<DeclaredDim>& dims) {
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(dtype));
  auto* shape = tt->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (auto* v = std::get_if<int64_t>(&d)) dim->set_dim_value(*v);
    else dim->set_dim_param(std::get<std::string>(d));
  }
}
}  // namespace

OnnxBuilder::OnnxBuilder(int default_opset, const std::string& graph_name) {
  model_.set_ir_version(10);
  model_.set_producer_name("tern");
  add_opset("", default_opset);
  graph().set_name(graph_name);
}

void OnnxBuilder::add_opset(const std::string& domain, int version) {
  auto* os = model_.add_opset_import();
  os->set_domain(domain);
  os->set_version(version);
}

OnnxBuilder& OnnxBuilder::input(const std::string& name, DType dtype, const std::vector<DeclaredDim>& dims) {
  auto* vi = graph().add_input();
  vi->set_name(name);
  fill_type(vi, dtype, dims);
  return *this;
}

OnnxBuilder& OnnxBuilder::output(const std::string& name, DType dtype, const std::vector<DeclaredDim>& dims) {
  auto* vi = graph().add_output();
  vi->set_name(name);
  if (dtype != DType::Undefined) fill_type(vi, dtype, dims);
  return *this;
}

onnx::NodeProto& OnnxBuilder::node(const std::string& op, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                                   const std::string& domain) {
  auto* n = graph().add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + std::to_string(graph().node_size()));
  if (!domain.empty()) n->set_domain(domain);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return *n;
}

void OnnxBuilder::initializer(const std::string& name, const Tensor& value) {
  auto* t = graph().add_initializer();
  t->set_name(name);
  t->set_data_type(static_cast<int32_t>(value.dtype()));
  for (int64_t d : value.shape()) t->add_dims(d);
  t->set_raw_data(value.raw(), value.nbytes());
}

void OnnxBuilder::attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void OnnxBuilder::attr(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

void OnnxBuilder::attr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

void OnnxBuilder::attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void OnnxBuilder::save(const std::filesystem::path& path, const std::string& external_data, size_t external_min_bytes) const {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  onnx::ModelProto m = model_;
  if (!external_data.empty()) {
    OutputFile data(path.parent_path() / external_data);
    size_t offset = 0;
    static const char zeros[64] = {};
    for (auto& t : *m.mutable_graph()->mutable_initializer()) {
      if (t.raw_data().size() < external_min_bytes) continue;
      const size_t pad = (64 - offset % 64) % 64;
      data.write(zeros, pad);
      offset += pad;
      data.write(t.raw_data().data(), t.raw_data().size());
      auto add = [&](const char* k, const std::string& v) {
        auto* e = t.add_external_data();
        e->set_key(k);
        e->set_value(v);
      };
      add("location", external_data);
      add("offset", std::to_string(offset));
      add("length", std::to_string(t.raw_data().size()));
      offset += t.raw_data().size();
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
    }
    data.close();
  }
  std::string bytes;
  if (!m.SerializeToString(&bytes)) fail("cannot serialize the model for '", path.string(), "' (over 2 GB inside the file?)");
  write_whole_file(path, bytes);
}

}  // namespace tern::convert
