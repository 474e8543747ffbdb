#include "ops/op.h"

#include "ops/register_all.h"
#include "ops/weight_packer.h"

namespace tern {

DType InferContext::dtype(int i) const {
  if (!has(i)) fail("input ", i, " is missing");
  DType t = inputs_[static_cast<size_t>(i)].dtype;
  if (t == DType::Undefined) throw ShapeUnknown{};  // load time: the producer's rule could not say
  return t;
}

const SymShape& InferContext::shape(int i) const {
  if (!has(i)) fail("input ", i, " is missing");
  const SymShape* s = inputs_[static_cast<size_t>(i)].shape;
  if (!s) throw ShapeUnknown{};
  return *s;
}

const Dim& InferContext::dim(int i, int64_t k) const {
  const SymShape& s = shape(i);
  if (k >= static_cast<int64_t>(s.size())) fail("input ", i, " has rank ", s.size(), "; its dim ", k, " is needed");
  return s[static_cast<size_t>(k)];
}

const Tensor& InferContext::require_value(int i) const {
  if (!has(i)) fail("input ", i, " is missing");
  const Tensor* v = inputs_[static_cast<size_t>(i)].value;
  if (!v) throw ShapeUnknown{};
  return *v;
}

Shape InferContext::concrete_shape(int i) const {
  auto c = concrete(shape(i));
  if (!c) throw ShapeUnknown{};
  return *c;
}

void InferContext::set(int i, DType dtype, SymShape shape) {
  if (i >= static_cast<int>(outputs.size())) return;  // optional output not requested
  Output& o = outputs[static_cast<size_t>(i)];
  o = Output{};
  o.dtype = dtype;
  o.shape = std::move(shape);
}

std::optional<SymShape> InferContext::shape_value(int i) const {
  if (!has(i)) return std::nullopt;
  const Input& in = inputs_[static_cast<size_t>(i)];
  if (in.value && is_integer(in.value->dtype()) && in.value->rank() <= 1) {
    SymShape s;
    for (int64_t v : in.value->to_i64_vector()) {
      if (v < -1) return std::nullopt;
      s.push_back(v == -1 ? Dim::named(kInferredDim) : Dim::known(v));
    }
    return s;
  }
  if (in.sym_value) return *in.sym_value;
  return std::nullopt;
}

void InferContext::set_sym_value(int i, SymShape elements) {
  if (i >= static_cast<int>(outputs.size()) || !outputs[static_cast<size_t>(i)].shape) return;
  Output& o = outputs[static_cast<size_t>(i)];
  auto shape = concrete(*o.shape);
  if (!shape || numel_of(*shape) != static_cast<int64_t>(elements.size()) || !is_integer(o.dtype)) return;
  if (auto known = concrete(elements)) {
    o.value = cast_to(Tensor::from_vector<int64_t>(*known, *shape), o.dtype);
  }
  o.sym_value = std::move(elements);
}

void InferContext::set_value(int i, Tensor value) {
  if (i >= static_cast<int>(outputs.size())) return;
  Output& o = outputs[static_cast<size_t>(i)];
  o = Output{};
  o.dtype = value.dtype();
  o.shape = sym_shape(value.shape());
  o.value = std::move(value);
}

void InferContext::check_dtype(int i, std::initializer_list<DType> allowed) const {
  DType t = dtype(i);
  for (DType a : allowed)
    if (a == t) return;
  fail_unsupported(node.describe(), ": input ", i, " has data type ", dtype_name(t), ", which this op does not support");
}

const Tensor& RunContext::in(int i) const {
  if (!has(i)) fail(node.describe(), ": required input ", i, " is missing");
  return *inputs[static_cast<size_t>(i)];
}

InferContext RunContext::values() const {
  std::vector<InferContext::Input> infos;
  for (const Tensor* t : inputs) infos.push_back({t ? t->dtype() : DType::Undefined, nullptr, t, t != nullptr, nullptr});
  return InferContext(node, std::move(infos));
}

OpRegistry& OpRegistry::instance() {
  static OpRegistry r;
  return r;
}

OpRegistry::OpRegistry() { register_all_ops(*this); }

void OpRegistry::add(const std::string& domain, const std::string& op_type, OpFactory f) {
  factories_[domain + "::" + op_type] = std::move(f);
}

void OpRegistry::add_variant(DeviceKind device, const std::string& domain, const std::string& op_type, OpFactory f) {
  if (device != DeviceKind::OpenCL) fail("op variants are for the OpenCL device");
  opencl_variants_[domain + "::" + op_type] = std::move(f);
}

bool OpRegistry::has(const std::string& domain, const std::string& op_type) const { return factories_.count(domain + "::" + op_type) != 0; }

std::unique_ptr<Op> OpRegistry::create(const Node& node, DeviceKind device) const {
  const std::string key = node.domain + "::" + node.op_type;
  if (device == DeviceKind::OpenCL)
    if (auto v = opencl_variants_.find(key); v != opencl_variants_.end()) return v->second(node);
  auto it = factories_.find(key);
  if (it == factories_.end())
    fail_unsupported("unsupported op ", node.op_type, " (domain '", node.domain.empty() ? "ai.onnx" : node.domain, "', opset ", node.opset,
                     ") at node '", node.name, "'");
  return it->second(node);
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> r;
  for (const auto& kv : factories_) r.push_back(kv.first);
  return r;
}

int64_t normalize_axis(const Node& node, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) fail(node.describe(), ": axis ", axis, " is out of range for rank ", rank);
  return a;
}

AxisSplit split_at_axis(const Shape& shape, int64_t axis) {
  AxisSplit s{1, shape.empty() ? 1 : shape[static_cast<size_t>(axis)], 1};
  for (int64_t k = 0; k < axis; ++k) s.outer *= shape[static_cast<size_t>(k)];
  for (size_t k = static_cast<size_t>(axis) + 1; k < shape.size(); ++k) s.inner *= shape[k];
  return s;
}

void check_broadcasts_to(const Node& node, const Shape& from, const Shape& to) {
  if (broadcast_shapes(node, sym_shape(from), sym_shape(to)) != sym_shape(to))
    fail(node.describe(), ": ", shape_str(from), " does not broadcast to ", shape_str(to));
}

SymShape broadcast_shapes(const Node& node, const SymShape& a, const SymShape& b) {
  size_t r = std::max(a.size(), b.size());
  SymShape out(r);
  for (size_t i = 0; i < r; ++i) {
    const Dim* da = i < r - a.size() ? nullptr : &a[i - (r - a.size())];
    const Dim* db = i < r - b.size() ? nullptr : &b[i - (r - b.size())];
    if (!da) {
      out[i] = *db;
      continue;
    }
    if (!db) {
      out[i] = *da;
      continue;
    }
    if (da->is_known() && da->value == 1) out[i] = *db;
    else if (db->is_known() && db->value == 1) out[i] = *da;
    else if (da->is_known() && db->is_known()) {
      if (da->value != db->value) fail(node.describe(), ": shapes ", sym_shape_str(a), " and ", sym_shape_str(b), " cannot be broadcast");
      out[i] = *da;
    } else if (*da == *db) out[i] = *da;
    else if (da->is_known()) out[i] = *da;  // a symbol must equal the known size (or be 1)
    else if (db->is_known()) out[i] = *db;
    else if (da->symbol.empty() != db->symbol.empty()) out[i] = da->symbol.empty() ? *db : *da;  // ? is 1 or that symbol
    else out[i] = Dim{};
  }
  return out;
}

WeightPacker* Op::packer() { return dynamic_cast<WeightPacker*>(this); }

OpCost op_cost(const Op& op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs, const OpState* state) {
  if (const CostedOp* c = op.costed()) return c->cost(inputs, outputs, state);
  if (op.traits().outputs_are_views) return {};  // no data moves
  return elementwise_cost(inputs, outputs);
}

OpCost elementwise_cost(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) {
  OpCost c;
  for (const Tensor* t : inputs)
    if (t && t->raw()) c.bytes += static_cast<double>(t->nbytes());
  for (const Tensor& t : outputs) {
    c.bytes += static_cast<double>(t.nbytes());
    c.flops += static_cast<double>(t.numel());
  }
  return c;
}

std::string op_kernel(const Op& op, const std::vector<const Tensor*>& inputs, kernels::Isa isa) {
  const CostedOp* c = op.costed();
  return c ? c->kernel(inputs, isa) : std::string();
}

std::unique_ptr<OpState> make_op_state(const Op& op) {
  const StatefulOp* s = op.stateful();
  return s ? s->make_state() : nullptr;
}

}  // namespace tern
