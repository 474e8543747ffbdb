#include "ops/subgraph.h"

#include <algorithm>
#include <cstring>

#include "ops/execute.h"

namespace tern {

std::shared_ptr<const Graph> subgraph_attr(const Node& node, const std::string& name) {
  const Attribute* a = node.attr(name, Attribute::Kind::Graph);
  if (!a || !a->g) fail(node.describe(), ": graph attribute '", name, "' is missing");
  return a->g;
}

Tensor slice_along(const Tensor& x, int64_t axis, int64_t t) {
  const AxisSplit s = split_at_axis(x.shape(), axis);
  Shape shape = x.shape();
  shape.erase(shape.begin() + axis);
  Tensor y(x.dtype(), shape);
  const size_t inner = bytes_for(x.dtype(), s.inner);
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(static_cast<char*>(y.raw()) + static_cast<size_t>(o) * inner,
                static_cast<const char*>(x.raw()) + static_cast<size_t>(o * s.n + t) * inner, inner);
  return y;
}

int64_t control_value(const std::string& who, const Tensor& t, DType dtype, const char* what) {
  if (t.dtype() != dtype || t.numel() != 1)
    fail(who, ": ", what, " must be one ", dtype_name(dtype), ", got ", dtype_name(t.dtype()), " ", shape_str(t.shape()));
  return dtype == DType::Bool ? static_cast<const uint8_t*>(t.raw())[0] != 0 : t.data<int64_t>()[0];
}

Tensor stack_along(const std::vector<Tensor>& slices, int64_t axis, const std::string& who, const Value& declared) {
  if (slices.empty()) return Tensor(declared.dtype == DType::Undefined ? DType::Float32 : declared.dtype, {0});
  const Tensor& first = slices[0];
  for (const Tensor& s : slices)
    if (s.dtype() != first.dtype() || s.shape() != first.shape())
      fail(who, ": its body's scan output is ", dtype_name(s.dtype()), " ", shape_str(s.shape()), " in one iteration and ",
           dtype_name(first.dtype()), " ", shape_str(first.shape()), " in another");
  if (axis < 0 || axis > first.rank()) fail(who, ": scan output axis ", axis, " is outside rank ", first.rank() + 1);
  Shape shape = first.shape();
  shape.insert(shape.begin() + axis, static_cast<int64_t>(slices.size()));
  Tensor y(first.dtype(), shape);
  const AxisSplit s = split_at_axis(shape, axis);
  const size_t inner = bytes_for(first.dtype(), s.inner);
  for (int64_t t = 0; t < s.n; ++t)
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(static_cast<char*>(y.raw()) + static_cast<size_t>(o * s.n + t) * inner,
                  static_cast<const char*>(slices[static_cast<size_t>(t)].raw()) + static_cast<size_t>(o) * inner, inner);
  return y;
}

Subgraph::Subgraph(const Node& owner, std::shared_ptr<const Graph> body, size_t explicit_inputs)
    : owner_(owner.describe()), body_(std::move(body)) {
  const Graph& g = *body_;
  const auto& registry = OpRegistry::instance();
  for (const Node& n : g.nodes) ops_.push_back(registry.create(n));
  const std::vector<std::string> outer = outer_values_read(owner);
  if (explicit_inputs + outer.size() != owner.inputs.size())
    fail(owner.describe(), ": has ", owner.inputs.size(), " inputs; its body '", g.name, "' takes ", explicit_inputs,
         " of them and its subgraphs read ", outer.size(), " values from outside");
  for (size_t i = 0; i < outer.size(); ++i)
    if (const int id = g.find_value(outer[i]); id >= 0) outer_.push_back({id, explicit_inputs + i});
  std::vector<int> last_use(g.values.size(), -1);
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int in : g.nodes[k].inputs)
      if (in >= 0) last_use[static_cast<size_t>(in)] = static_cast<int>(k);
  for (int o : g.outputs) last_use[static_cast<size_t>(o)] = -1;
  release_after_.resize(g.nodes.size());
  for (size_t v = 0; v < g.values.size(); ++v)
    if (last_use[v] >= 0) release_after_[static_cast<size_t>(last_use[v])].push_back(static_cast<int>(v));
}

std::vector<Tensor> Subgraph::run(const std::vector<Tensor>& inputs, const std::vector<const Tensor*>& owner_inputs,
                                  const kernels::Context& cpu) const {
  const Graph& g = *body_;
  if (inputs.size() != g.inputs.size()) fail(owner_, ": its body '", g.name, "' takes ", g.inputs.size(), " inputs, given ", inputs.size());
  std::vector<Tensor> values(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].constant) values[v] = *g.values[v].constant;
  for (size_t i = 0; i < inputs.size(); ++i) values[static_cast<size_t>(g.inputs[i])] = inputs[i];
  for (const auto& [id, at] : outer_)
    if (at < owner_inputs.size() && owner_inputs[at]) values[static_cast<size_t>(id)] = *owner_inputs[at];
  std::vector<const Tensor*> ins;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& node = g.nodes[k];
    ins.assign(node.inputs.size(), nullptr);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int id = node.inputs[i];
      if (id < 0) continue;
      if (!values[static_cast<size_t>(id)].defined())
        fail(owner_, ": in its body '", g.name, "', ", node.describe(), " reads '", g.values[static_cast<size_t>(id)].name,
             "', which has no value");
      ins[i] = &values[static_cast<size_t>(id)];
    }
    auto outs = execute_node(*ops_[k], node, ins, allocate_on_heap, cpu);
    for (size_t i = 0; i < node.outputs.size(); ++i)
      if (node.outputs[i] >= 0) values[static_cast<size_t>(node.outputs[i])] = std::move(outs[i]);
    for (int v : release_after_[k])
      if (!g.values[static_cast<size_t>(v)].constant) values[static_cast<size_t>(v)] = Tensor();
  }
  std::vector<Tensor> out;
  out.reserve(g.outputs.size());
  for (int o : g.outputs) {
    if (!values[static_cast<size_t>(o)].defined())
      fail(owner_, ": its body '", g.name, "' computed no value for output '", g.values[static_cast<size_t>(o)].name, "'");
    out.push_back(values[static_cast<size_t>(o)]);
  }
  return out;
}

}  // namespace tern
