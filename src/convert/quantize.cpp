#include "convert/quantize.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include "convert/onnx_builder.h"
#include "graph/onnx_loader.h"
#include "kernels/cpu/nbits.h"
#include "kernels/cpu/parallel.h"

namespace tern::convert {

int quantize_model(const std::string& in_path, const std::string& out_path, const QuantizeOptions& options, const Progress& progress) {
  const int64_t bits = options.bits, block = options.block;
  if (bits != 4 && bits != 8) fail("quantize: bits must be 4 or 8, got ", bits);
  if (block < 16 || (block & (block - 1)) != 0) fail("quantize: block must be a power of 2 >= 16, got ", block);
  if (options.accuracy_level < 0 || options.accuracy_level > 4)
    fail("quantize: accuracy level must be 0 to 4, got ", options.accuracy_level);
  onnx::ModelProto proto;
  read_model_proto(in_path, proto);
  const Model model = load_onnx(in_path);  // the initializers' values, external data resolved
  const Graph& g = *model.graph;
  auto weight = [&](const std::string& name) -> const Tensor* {
    const int id = g.find_value(name);
    if (id < 0 || !g.values[static_cast<size_t>(id)].constant) return nullptr;
    const Tensor& t = *g.values[static_cast<size_t>(id)].constant;
    const bool is_float = t.dtype() == DType::Float32 || t.dtype() == DType::Float16;
    return is_float && t.rank() == 2 && t.numel() > 0 ? &t : nullptr;
  };
  // Tensor attributes the source keeps in its external data file (Optimum's exports past protobuf's 2 GB), which the
  // output does not carry, taken as the loader read them: a Constant's value becomes an initializer of its output
  // (saved with the others, in the output's external data when large), any other node's tensor is written inline.
  auto external_attributes = [](const onnx::NodeProto& n) {
    return std::any_of(n.attribute().begin(), n.attribute().end(),
                       [](const auto& a) { return a.has_t() && a.t().data_location() == onnx::TensorProto::EXTERNAL; });
  };
  auto loaded = [&](const onnx::NodeProto& n) -> const Node& {  // (the loader links each value to its producer)
    const int id = n.output_size() > 0 ? g.find_value(n.output(0)) : -1;
    if (id < 0 || g.values[static_cast<size_t>(id)].producer < 0) fail("quantize: node '", n.name(), "' is not in the loaded graph");
    return g.nodes[static_cast<size_t>(g.values[static_cast<size_t>(id)].producer)];
  };
  std::map<std::string, bool> initializers;  // name → still read by a node of the output
  for (const auto& t : proto.graph().initializer()) initializers[t.name()] = false;

  OnnxBuilder out;
  out.proto() = proto;
  out.graph().clear_initializer();
  out.graph().clear_node();
  std::map<std::string, bool> quantized;  // weights already written in MatMulNBits form
  int rewritten = 0;
  const int64_t steps = proto.graph().node_size() + 1;
  int64_t step = 0;
  for (const auto& n : proto.graph().node()) {
    if (progress) progress(step++, steps);
    const Tensor* w = n.op_type() == "MatMul" && n.domain().empty() && n.input_size() == 2 ? weight(n.input(1)) : nullptr;
    if (!w) {
      if (external_attributes(n)) {
        const Node& node = loaded(n);
        if (n.op_type() == "Constant" && n.domain().empty() && node.has_attr("value")) {
          out.initializer(n.output(0), node.attrs.at("value").t);
          continue;
        }
        onnx::NodeProto& copy = *out.graph().add_node() = n;
        for (auto& a : *copy.mutable_attribute()) {
          if (!a.has_t() || a.t().data_location() != onnx::TensorProto::EXTERNAL) continue;
          const Tensor& t = node.attrs.at(a.name()).t;
          a.mutable_t()->clear_external_data();
          a.mutable_t()->set_data_location(onnx::TensorProto::DEFAULT);
          a.mutable_t()->set_raw_data(t.raw(), t.nbytes());
        }
      } else {
        *out.graph().add_node() = n;
      }
      for (const auto& in : n.input())
        if (initializers.count(in)) initializers[in] = true;
      continue;
    }
    const std::string& name = n.input(1);
    const int64_t K = w->dim(0), N = w->dim(1);
    if (!quantized[name]) {
      const Tensor w32 = cast_to(*w, DType::Float32);
      const kernels::QuantizedWeights q =
          kernels::quantize_nbits({kernels::hardware_threads()}, w32.data<float>(), K, N, bits, block, options.symmetric);
      const int64_t k_blocks = (K + block - 1) / block;
      out.initializer(name + "_q" + std::to_string(bits), Tensor(DType::UInt8, {N, k_blocks, block * bits / 8}, q.data.buffer()));
      // Scales have the activations' type (MatMulNBits' T1).
      out.initializer(name + "_scales", cast_to(q.scales, w->dtype()));
      if (!options.symmetric) out.initializer(name + "_zp", q.zero_points);
      quantized[name] = true;
    }
    std::vector<std::string> inputs{n.input(0), name + "_q" + std::to_string(bits), name + "_scales"};
    if (!options.symmetric) inputs.push_back(name + "_zp");
    auto& m = out.node("MatMulNBits", inputs, {n.output(0)}, "com.microsoft");
    m.set_name(n.name().empty() ? name + "_nbits" : n.name() + "_nbits");
    OnnxBuilder::attr(m, "K", K);
    OnnxBuilder::attr(m, "N", N);
    OnnxBuilder::attr(m, "bits", bits);
    OnnxBuilder::attr(m, "block_size", block);
    if (options.accuracy_level > 0) OnnxBuilder::attr(m, "accuracy_level", options.accuracy_level);
    ++rewritten;
  }
  // Node order is the input's, which was valid; the new nodes sit where their MatMuls were.
  for (const auto& t : proto.graph().initializer())
    if (initializers[t.name()]) {
      const int id = g.find_value(t.name());
      out.initializer(t.name(), *g.values[static_cast<size_t>(id)].constant);
    }
  bool has_ms = false;
  for (const auto& os : out.proto().opset_import()) has_ms |= os.domain() == "com.microsoft";
  if (!has_ms && rewritten > 0) out.add_opset("com.microsoft", 1);
  out.save(out_path, std::filesystem::path(out_path).filename().string() + "_data");
  if (progress) progress(steps, steps);
  return rewritten;
}

}  // namespace tern::convert
