// Ops that only reshape or describe shapes. Reshape-like ops return views of their input (no copy).
#include <cmath>
#include <cstring>
#include <set>

#include "core/checked_math.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/elementwise.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

// Output 0 is input 0's data under a new shape; subclasses give the shape rule.
class ViewOp : public Op {
 public:
  OpTraits traits() const override { return {.outputs_are_views = true}; }
  // A view keeps the elements, so a shape-like input's symbolic elements carry over.
  static void keep_elements(InferContext& ctx) {
    if (auto e = ctx.shape_value(0)) ctx.set_sym_value(0, *e);
  }
  void run(RunContext& ctx) const override { ctx.out(0).view_elements_of(ctx.in(0)); }
};

class ReshapeOp : public ViewOp {
 public:
  explicit ReshapeOp(const Node& n) : allowzero_(n.attr_int("allowzero", 0) != 0) {}
  void infer(InferContext& ctx) const override {
    const SymShape& in = ctx.shape(0);
    if (!ctx.value(1)) {  // target known only symbolically (Concat of Shape parts)
      auto target = ctx.shape_value(1);
      if (!target) throw ShapeUnknown{};
      ctx.set(0, ctx.dtype(0), symbolic_target(ctx, in, *target));
      keep_elements(ctx);
      return;
    }
    std::vector<int64_t> target = ctx.require_value(1).to_i64_vector();
    SymShape out(target.size());
    int infer_at = -1;
    for (size_t i = 0; i < target.size(); ++i) {
      int64_t t = target[i];
      if (t == -1) {
        if (infer_at >= 0) ctx.fail("shape ", shape_str(target), " has more than one -1");
        infer_at = static_cast<int>(i);
      } else if (t == 0 && !allowzero_) {
        if (i >= in.size()) ctx.fail("shape ", shape_str(target), " copies dim ", i, " that input ", sym_shape_str(in), " lacks");
        out[i] = in[i];
      } else if (t < 0) {
        ctx.fail("invalid shape ", shape_str(target));
      } else {
        out[i] = Dim::known(t);
      }
    }
    auto in_c = concrete(in);
    if (infer_at >= 0) {
      int64_t known = 1;
      bool all_known = in_c.has_value();
      for (size_t i = 0; i < out.size(); ++i)
        if (static_cast<int>(i) != infer_at) {
          if (!out[i].is_known()) all_known = false;
          else if (__builtin_mul_overflow(known, out[i].value, &known)) ctx.fail("shape ", shape_str(target), " overflows int64");
        }
      if (all_known) {
        int64_t total = numel_of(*in_c);
        if (known == 0 || total % known != 0) ctx.fail("cannot reshape ", sym_shape_str(in), " to ", shape_str(target));
        out[static_cast<size_t>(infer_at)] = Dim::known(total / known);
      } else {
        out[static_cast<size_t>(infer_at)] = what_is_left(in, out, infer_at);
      }
    }
    if (in_c) {
      if (auto out_c = concrete(out); out_c && numel_of(*out_c) != numel_of(*in_c))
        ctx.fail("cannot reshape ", sym_shape_str(in), " to ", shape_str(target), " (element counts differ)");
    }
    ctx.set(0, ctx.dtype(0), out);
    keep_elements(ctx);
  }

 private:
  // 0 copies the input's dim (unless allowzero); the one -1 takes what the other dims leave: known when
  // the input's and the target's symbols cancel and their known parts divide, else a symbol or product of them
  // ([batch, seq, 4, 16] to [batch, -1, 16] is [batch, 4*seq, 16]) when the division is exact.
  SymShape symbolic_target(const InferContext& ctx, const SymShape& in, SymShape out) const {
    int infer_at = -1;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].symbol == kInferredDim) {
        if (infer_at >= 0) ctx.fail("shape ", sym_shape_str(out), " has more than one -1");
        infer_at = static_cast<int>(i);
      } else if (out[i].is_known() && out[i].value == 0 && !allowzero_) {
        if (i >= in.size()) ctx.fail("shape ", sym_shape_str(out), " copies dim ", i, " that input ", sym_shape_str(in), " lacks");
        out[i] = in[i];
      }
    }
    if (infer_at >= 0) out[static_cast<size_t>(infer_at)] = what_is_left(in, out, infer_at);
    return out;
  }
  // The -1's dim: the input's size over the other target dims', known or a product of symbols when it divides.
  static Dim what_is_left(const SymShape& in, const SymShape& out, int infer_at) {
    Dim total = Dim::known(1), others = Dim::known(1);
    for (const Dim& d : in) total = dim_product(total, d);
    for (size_t i = 0; i < out.size(); ++i)
      if (static_cast<int>(i) != infer_at) others = dim_product(others, out[i]);
    return dim_quotient(total, others);
  }

  bool allowzero_;
};

class FlattenOp : public ViewOp {
 public:
  explicit FlattenOp(const Node& n) : axis_(n.attr_int("axis", 1)) {}
  void infer(InferContext& ctx) const override {
    const SymShape& in = ctx.shape(0);
    int64_t r = static_cast<int64_t>(in.size());
    int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    if (axis < 0 || axis > r) ctx.fail("axis ", axis_, " out of range for rank ", r);
    auto prod = [&](int64_t b, int64_t e) {
      Dim p = Dim::known(1);
      for (int64_t i = b; i < e; ++i) p = dim_product(p, in[static_cast<size_t>(i)]);
      return p;
    };
    ctx.set(0, ctx.dtype(0), SymShape{prod(0, axis), prod(axis, r)});
    keep_elements(ctx);
  }

 private:
  int64_t axis_;
};

// Squeeze/Unsqueeze: axes come from an attribute before opset 13, from input 1 since.
std::vector<int64_t> axes_of(const InferContext& ctx, const std::vector<int64_t>& attr_axes, bool from_input) {
  if (!from_input) return attr_axes;
  if (!ctx.has(1)) return {};
  return ctx.require_value(1).to_i64_vector();
}

class SqueezeOp : public ViewOp {
 public:
  explicit SqueezeOp(const Node& n) : axes_(n.attr_ints("axes")), from_input_(n.opset >= 13) {}
  void infer(InferContext& ctx) const override {
    const SymShape& in = ctx.shape(0);
    std::vector<int64_t> axes = axes_of(ctx, axes_, from_input_);
    std::vector<char> drop(in.size(), 0);
    if (axes.empty()) {
      for (size_t i = 0; i < in.size(); ++i) {
        if (!in[i].is_known()) throw ShapeUnknown{};
        drop[i] = in[i].value == 1;
      }
    }
    for (int64_t a : axes) {
      int64_t k = normalize_axis(ctx.node, a, static_cast<int64_t>(in.size()));
      if (in[static_cast<size_t>(k)].is_known() && in[static_cast<size_t>(k)].value != 1)
        ctx.fail("cannot squeeze axis ", a, " of size ", in[static_cast<size_t>(k)].value);
      drop[static_cast<size_t>(k)] = 1;
    }
    SymShape out;
    for (size_t i = 0; i < in.size(); ++i)
      if (!drop[i]) out.push_back(in[i]);
    ctx.set(0, ctx.dtype(0), out);
    keep_elements(ctx);
  }

 private:
  std::vector<int64_t> axes_;
  bool from_input_;
};

class UnsqueezeOp : public ViewOp {
 public:
  explicit UnsqueezeOp(const Node& n) : axes_(n.attr_ints("axes")), from_input_(n.opset >= 13) {}
  void infer(InferContext& ctx) const override {
    const SymShape& in = ctx.shape(0);
    std::vector<int64_t> axes = axes_of(ctx, axes_, from_input_);
    int64_t r = static_cast<int64_t>(in.size() + axes.size());
    std::vector<char> add(static_cast<size_t>(r), 0);
    for (int64_t a : axes) {
      int64_t k = normalize_axis(ctx.node, a, r);
      if (add[static_cast<size_t>(k)]) ctx.fail("axis ", a, " repeated");
      add[static_cast<size_t>(k)] = 1;
    }
    SymShape out;
    size_t j = 0;
    for (int64_t i = 0; i < r; ++i) out.push_back(add[static_cast<size_t>(i)] ? Dim::known(1) : in.at(j++));
    ctx.set(0, ctx.dtype(0), out);
    keep_elements(ctx);
  }

 private:
  std::vector<int64_t> axes_;
  bool from_input_;
};

class IdentityOp : public ViewOp {
 public:
  explicit IdentityOp(const Node&) {}
  void infer(InferContext& ctx) const override {
    ctx.same_as_input(0, 0);
    keep_elements(ctx);
  }
};

// Dropout is the identity at inference, and in training mode with ratio 0; its optional mask output
// is then all true. Training with ratio > 0 draws random masks, which tern does not do.
class DropoutOp : public Op {
 public:
  explicit DropoutOp(const Node&) {}
  void infer(InferContext& ctx) const override {
    const bool training = ctx.has(2) && ctx.require_value(2).at_i64(0) != 0;
    const double ratio = ctx.has(1) ? ctx.require_value(1).at_f64(0) : 0.5;
    if (training && ratio != 0.0) fail_unsupported(ctx.node.describe(), ": training_mode with ratio > 0 (random masks) is not supported");
    ctx.same_as_input(0, 0);
    ctx.set(1, DType::Bool, ctx.shape(0));
  }
  void run(RunContext& ctx) const override {
    std::memcpy(ctx.out(0).raw(), ctx.in(0).raw(), ctx.in(0).nbytes());
    if (ctx.outputs.size() > 1 && ctx.out(1).defined()) {
      bool* m = ctx.out(1).data<bool>();
      std::fill(m, m + ctx.out(1).numel(), true);
    }
  }
};

class ShapeOp : public Op {
 public:
  explicit ShapeOp(const Node& n) : start_(n.attr_int("start", 0)), end_(n.attr_int("end", INT64_MAX)) {}
  void infer(InferContext& ctx) const override {
    const SymShape& in = ctx.shape(0);
    auto [b, e] = range(static_cast<int64_t>(in.size()));
    ctx.set(0, DType::Int64, Shape{e - b});
    ctx.set_sym_value(0, SymShape(in.begin() + b, in.begin() + e));  // folds when all are known
  }
  void run(RunContext& ctx) const override {
    const Shape& s = ctx.in(0).shape();
    auto [b, e] = range(static_cast<int64_t>(s.size()));
    int64_t* out = ctx.out(0).data<int64_t>();
    for (int64_t i = b; i < e; ++i) out[i - b] = s[static_cast<size_t>(i)];
  }

 private:
  std::pair<int64_t, int64_t> range(int64_t r) const {
    auto clampi = [r](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t{0}, r); };
    int64_t b = clampi(start_), e = clampi(end_);
    return {b, std::max(b, e)};
  }
  int64_t start_, end_;
};

class SizeOp : public Op {
 public:
  explicit SizeOp(const Node&) {}
  void infer(InferContext& ctx) const override {
    ctx.set(0, DType::Int64, Shape{});
    if (auto s = concrete(ctx.shape(0))) ctx.set_value(0, Tensor::scalar<int64_t>(numel_of(*s)));
  }
  void run(RunContext& ctx) const override { ctx.out(0).data<int64_t>()[0] = ctx.in(0).numel(); }
};

class ExpandOp : public Op {
 public:
  explicit ExpandOp(const Node&) {}
  void infer(InferContext& ctx) const override {
    auto target = ctx.shape_value(1);
    if (!target) {  // the target's length still gives the rank; dims > 1 of the input survive
      const SymShape& t = ctx.shape(1);
      if (t.size() != 1 || !t[0].is_known()) throw ShapeUnknown{};
      const SymShape& x = ctx.shape(0);
      SymShape y(static_cast<size_t>(std::max<int64_t>(t[0].value, ctx.rank(0))));
      for (size_t i = 0; i < x.size(); ++i)
        if (x[i].is_known() && x[i].value > 1) y[y.size() - x.size() + i] = x[i];
      ctx.set(0, ctx.dtype(0), y);
      return;
    }
    ctx.set(0, ctx.dtype(0), broadcast_shapes(ctx.node, ctx.shape(0), *target));
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    kernels::broadcast_copy(x.raw(), x.shape(), y.raw(), y.shape(), dtype_size(x.dtype()));
  }
};

class ConstantOfShapeOp : public Op {
 public:
  explicit ConstantOfShapeOp(const Node& n) {
    if (const Attribute* a = n.attr("value", Attribute::Kind::Tensor)) {
      if (a->t.numel() != 1) fail(n.describe(), ": value must hold exactly one element");
      value_ = a->t;
    } else {
      value_ = Tensor::scalar<float>(0.0f);
    }
  }
  void infer(InferContext& ctx) const override {
    if (const Tensor* v = ctx.value(0)) {
      std::vector<int64_t> s = v->to_i64_vector();
      for (int64_t d : s)
        if (d < 0) ctx.fail("negative dimension in shape ", shape_str(s));
    }
    auto shape = ctx.shape_value(0);
    if (!shape) throw ShapeUnknown{};
    ctx.set(0, value_.dtype(), *shape);
  }
  void run(RunContext& ctx) const override {
    Tensor& y = ctx.out(0);
    size_t es = dtype_size(y.dtype());
    char* out = static_cast<char*>(y.raw());
    for (int64_t i = 0; i < y.numel(); ++i) std::memcpy(out + static_cast<size_t>(i) * es, value_.raw(), es);
  }

 private:
  Tensor value_;
};

class ConstantOp : public Op {
 public:
  explicit ConstantOp(const Node& n) {
    using K = Attribute::Kind;
    if (const Attribute* a = n.attr("value", K::Tensor)) value_ = a->t;
    else if (const Attribute* a = n.attr("value_float", K::Float)) value_ = Tensor::scalar<float>(a->f);
    else if (const Attribute* a = n.attr("value_int", K::Int)) value_ = Tensor::scalar<int64_t>(a->i);
    else if (const Attribute* a = n.attr("value_floats", K::Floats))
      value_ = Tensor::from_vector<float>(a->floats, {static_cast<int64_t>(a->floats.size())});
    else if (const Attribute* a = n.attr("value_ints", K::Ints))
      value_ = Tensor::from_vector<int64_t>(a->ints, {static_cast<int64_t>(a->ints.size())});
    else fail_unsupported(n.describe(), ": only tensor, float(s) and int(s) constants are supported");
  }
  void infer(InferContext& ctx) const override { ctx.set(0, value_.dtype(), value_.shape()); }
  void run(RunContext& ctx) const override {
    if (value_.nbytes()) std::memcpy(ctx.out(0).raw(), value_.raw(), value_.nbytes());
  }

 private:
  Tensor value_;
};

class RangeOp : public Op {
 public:
  explicit RangeOp(const Node&) {}
  void infer(InferContext& ctx) const override {
    if (!ctx.value(0) || !ctx.value(1) || !ctx.value(2)) {
      // Range(start, start + n, 1) over dims (a step's positions, a mask's columns) has length n; else unknown.
      const auto start = ctx.shape_value(0), limit = ctx.shape_value(1);
      const bool unit = ctx.value(2) && ctx.value(2)->numel() == 1 && ctx.value(2)->at_f64(0) == 1;
      Dim n = unit && start && limit && start->size() == 1 && limit->size() == 1 ? dim_difference((*limit)[0], (*start)[0]) : Dim{};
      if (n.is_known() && n.value < 0) n = Dim::known(0);
      ctx.set(0, ctx.dtype(0), SymShape{n});
      return;
    }
    double start = ctx.value(0)->at_f64(0), limit = ctx.value(1)->at_f64(0), delta = ctx.value(2)->at_f64(0);
    if (delta == 0) ctx.fail("delta is zero");
    const double count = std::ceil((limit - start) / delta);
    if (!(count < 9.2e18)) ctx.fail("start ", start, ", limit ", limit, ", delta ", delta, " give no countable length");
    const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
    ctx.set(0, ctx.dtype(0), Shape{n});
  }
  void run(RunContext& ctx) const override {
    Tensor& y = ctx.out(0);
    visit_numeric(y.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>) {
        fail("Range of bool");
      } else {
        using C = kernels::compute_t<T>;
        const C start = static_cast<C>(ctx.in(0).data<T>()[0]), delta = static_cast<C>(ctx.in(2).data<T>()[0]);
        T* out = y.data<T>();
        for (int64_t i = 0; i < y.numel(); ++i) out[i] = static_cast<T>(static_cast<C>(start + static_cast<C>(i) * delta));
      }
    });
  }
};

}  // namespace

void register_shape_ops(OpRegistry& r) {
  r.add("", "Reshape", factory<ReshapeOp>());
  r.add("", "Flatten", factory<FlattenOp>());
  r.add("", "Squeeze", factory<SqueezeOp>());
  r.add("", "Unsqueeze", factory<UnsqueezeOp>());
  r.add("", "Identity", factory<IdentityOp>());
  r.add("", "Dropout", factory<DropoutOp>());
  r.add("", "Shape", factory<ShapeOp>());
  r.add("", "Size", factory<SizeOp>());
  r.add("", "Expand", factory<ExpandOp>());
  r.add("", "ConstantOfShape", factory<ConstantOfShapeOp>());
  r.add("", "Constant", factory<ConstantOp>());
  r.add("", "Range", factory<RangeOp>());
}

}  // namespace tern
