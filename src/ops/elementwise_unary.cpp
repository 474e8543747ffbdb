// Unary element-wise ops: math functions and activations. One generic path: the op kind picks the
// scalar function, computed in float for float16/bfloat16 and in the storage type otherwise.
#include <cmath>

#include "kernels/cpu/elementwise.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

using kernels::compute_t;

// clang-format off
enum class UnKind {
  Neg, Abs, Sign, Sqrt, Reciprocal, Exp, Log, Erf, Tanh, Sigmoid, Relu, Cos, Sin, Tan, Acos, Asin, Atan,
  Cosh, Sinh, Acosh, Asinh, Atanh, Floor, Ceil, Round, Softplus, Softsign, LeakyRelu, Elu, Selu, Celu,
  HardSigmoid, HardSwish, ThresholdedRelu, Shrink, Mish, Gelu, GeluTanh, Swish, Identity, BitNot,
};
// clang-format on

struct Params {
  double alpha = 0, beta = 0, gamma = 0;
};

template <typename C>
inline C apply(UnKind k, C x, const Params& p) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (k) {
      case UnKind::Neg: return -x;
      case UnKind::Abs: return std::abs(x);
      case UnKind::Sign: return x > 0 ? C(1) : (x < 0 ? C(-1) : C(0));
      case UnKind::Sqrt: return std::sqrt(x);
      case UnKind::Reciprocal: return C(1) / x;
      case UnKind::Exp: return std::exp(x);
      case UnKind::Log: return std::log(x);
      case UnKind::Erf: return std::erf(x);
      case UnKind::Tanh: return std::tanh(x);
      case UnKind::Sigmoid: return x >= 0 ? C(1) / (C(1) + std::exp(-x)) : std::exp(x) / (C(1) + std::exp(x));
      case UnKind::Relu: return x > 0 ? x : C(0);
      case UnKind::Cos: return std::cos(x);
      case UnKind::Sin: return std::sin(x);
      case UnKind::Tan: return std::tan(x);
      case UnKind::Acos: return std::acos(x);
      case UnKind::Asin: return std::asin(x);
      case UnKind::Atan: return std::atan(x);
      case UnKind::Cosh: return std::cosh(x);
      case UnKind::Sinh: return std::sinh(x);
      case UnKind::Acosh: return std::acosh(x);
      case UnKind::Asinh: return std::asinh(x);
      case UnKind::Atanh: return std::atanh(x);
      case UnKind::Floor: return std::floor(x);
      case UnKind::Ceil: return std::ceil(x);
      case UnKind::Round: return std::nearbyint(x);  // round half to even (default FP rounding mode)
      case UnKind::Softplus: return x > 20 ? x : std::log1p(std::exp(x));
      case UnKind::Softsign: return x / (C(1) + std::abs(x));
      case UnKind::LeakyRelu: return x >= 0 ? x : C(p.alpha) * x;
      case UnKind::Elu: return x >= 0 ? x : C(p.alpha) * (std::exp(x) - C(1));
      case UnKind::Selu: return C(p.gamma) * (x > 0 ? x : C(p.alpha) * (std::exp(x) - C(1)));
      case UnKind::Celu: return std::max(C(0), x) + std::min(C(0), C(p.alpha) * (std::exp(x / C(p.alpha)) - C(1)));
      case UnKind::HardSigmoid: return std::max(C(0), std::min(C(1), C(p.alpha) * x + C(p.beta)));
      case UnKind::HardSwish: return x * std::max(C(0), std::min(C(1), x / C(6) + C(0.5)));
      case UnKind::ThresholdedRelu: return x > C(p.alpha) ? x : C(0);
      case UnKind::Shrink: return x < -C(p.alpha) ? x + C(p.beta) : (x > C(p.alpha) ? x - C(p.beta) : C(0));
      case UnKind::Mish: return x * std::tanh(x > 20 ? x : std::log1p(std::exp(x)));
      case UnKind::Gelu: return C(0.5) * x * (C(1) + std::erf(x / std::sqrt(C(2))));
      case UnKind::GeluTanh: return C(0.5) * x * (C(1) + std::tanh(std::sqrt(C(2) / C(M_PI)) * (x + C(0.044715) * x * x * x)));
      case UnKind::Swish: return x / (C(1) + std::exp(-C(p.alpha) * x));
      case UnKind::Identity: return x;
      case UnKind::BitNot: break;
    }
    fail("unary op not defined for floating-point inputs");
  } else if constexpr (std::is_same_v<C, bool>) {
    if (k == UnKind::Identity) return x;
    fail("unary op not defined for bool inputs");
  } else {
    switch (k) {
      case UnKind::Neg: return static_cast<C>(-x);
      case UnKind::Abs:
        if constexpr (std::is_signed_v<C>) return x < 0 ? static_cast<C>(-x) : x;
        else return x;
      case UnKind::Sign: return x > 0 ? C(1) : (x < 0 ? static_cast<C>(-1) : C(0));
      case UnKind::Relu: return x > 0 ? x : C(0);
      case UnKind::Identity:
      case UnKind::Floor:
      case UnKind::Ceil:
      case UnKind::Round: return x;
      case UnKind::BitNot: return static_cast<C>(~x);
      default: break;
    }
    fail("unary op not defined for integer inputs");
  }
}

// Also ONNX Runtime's bias-activation forms: an optional input 1 is added (broadcast) before the
// function (FastGelu, BiasGelu).
class UnaryOp : public Op {
 public:
  UnaryOp(const Node& n, UnKind kind) : kind_(kind) {
    switch (kind) {
      case UnKind::LeakyRelu: p_.alpha = n.attr_float("alpha", 0.01f); break;
      case UnKind::Elu:
      case UnKind::Celu: p_.alpha = n.attr_float("alpha", 1.0f); break;
      case UnKind::Selu:
        p_.alpha = n.attr_float("alpha", 1.67326319217681884765625f);
        p_.gamma = n.attr_float("gamma", 1.05070102214813232421875f);
        break;
      case UnKind::HardSigmoid:
        p_.alpha = n.attr_float("alpha", 0.2f);
        p_.beta = n.attr_float("beta", 0.5f);
        break;
      case UnKind::ThresholdedRelu: p_.alpha = n.attr_float("alpha", 1.0f); break;
      case UnKind::Shrink:
        p_.alpha = n.attr_float("lambd", 0.5f);
        p_.beta = n.attr_float("bias", 0.0f);
        break;
      case UnKind::Swish: p_.alpha = n.attr_float("alpha", n.op_type == "QuickGelu" ? 1.702f : 1.0f); break;
      case UnKind::Gelu: {
        std::string approx = n.attr_string("approximate", "none");
        if (approx == "tanh") kind_ = UnKind::GeluTanh;
        else if (approx != "none") fail(n.describe(), ": approximate must be 'none' or 'tanh', got '", approx, "'");
        break;
      }
      default: break;
    }
  }
  void infer(InferContext& ctx) const override {
    if (ctx.dtype(0) == DType::Bool && kind_ != UnKind::Identity) ctx.fail("does not take bool input");
    ctx.same_as_input(0, 0);
  }
  void run(RunContext& ctx) const override {
    Tensor x = ctx.in(0);
    Tensor& y = ctx.out(0);
    if (ctx.has(1)) {  // bias-activation form: x + bias first, in float
      Tensor xf = cast_to(x, DType::Float32).clone(), b = cast_to(ctx.in(1), DType::Float32);
      kernels::binary_broadcast(xf.data<float>(), xf.shape(), b.data<float>(), b.shape(), xf.data<float>(), xf.shape(),
                                [](float u, float v) { return u + v; });
      x = cast_to(xf, x.dtype());
    }
    visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const UnKind k = kind_;
      const Params p = p_;
      kernels::unary_map(x.data<T>(), y.data<T>(), x.numel(), [k, p](T v) { return static_cast<T>(apply<C>(k, static_cast<C>(v), p)); });
    });
  }

 private:
  UnKind kind_;
  Params p_;
};

// Clip: bounds come from attributes before opset 11 and from optional inputs since.
class ClipOp : public Op {
 public:
  explicit ClipOp(const Node& n) : lo_(n.attr_float("min", -INFINITY)), hi_(n.attr_float("max", INFINITY)) {}
  void infer(InferContext& ctx) const override { ctx.same_as_input(0, 0); }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
      if constexpr (std::is_floating_point_v<C>) {
        lo = static_cast<C>(lo_);
        hi = static_cast<C>(hi_);
      }
      if (ctx.has(1)) lo = static_cast<C>(ctx.in(1).data<T>()[0]);
      if (ctx.has(2)) hi = static_cast<C>(ctx.in(2).data<T>()[0]);
      kernels::unary_map(x.data<T>(), ctx.out(0).data<T>(), x.numel(), [lo, hi](T v) {
        C c = static_cast<C>(v);
        if constexpr (std::is_floating_point_v<C>) {
          if (std::isnan(c)) return v;
        }
        return static_cast<T>(std::min(std::max(c, lo), hi));  // numpy order: min > max yields max
      });
    });
  }

 private:
  float lo_, hi_;
};

// Ops whose output is bool: Not, IsNaN, IsInf.
class PredicateOp : public Op {
 public:
  explicit PredicateOp(const Node& n)
      : type_(n.op_type), pos_(n.attr_int("detect_positive", 1) != 0), neg_(n.attr_int("detect_negative", 1) != 0) {}
  void infer(InferContext& ctx) const override {
    if (type_ == "Not") ctx.check_dtype(0, {DType::Bool});
    else if (!is_float(ctx.dtype(0))) ctx.fail("needs a floating-point input");
    ctx.set(0, DType::Bool, ctx.shape(0));
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    bool* y = ctx.out(0).data<bool>();
    if (type_ == "Not") {
      kernels::unary_map(x.data<bool>(), y, x.numel(), [](bool v) { return !v; });
      return;
    }
    const bool is_nan = type_ == "IsNaN", pos = pos_, neg = neg_;
    Tensor xf = cast_to(x, DType::Float64);
    kernels::unary_map(xf.data<double>(), y, x.numel(), [=](double v) {
      if (is_nan) return std::isnan(v);
      return std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
    });
  }

 private:
  std::string type_;
  bool pos_, neg_;
};

class CastOp : public Op {
 public:
  explicit CastOp(const Node& n) : like_(n.op_type == "CastLike"), to_(static_cast<DType>(n.attr_int("to", 0))) {
    if (!like_ && (to_ == DType::String || bytes_for(to_, 2) == 0))
      fail_unsupported(n.describe(), ": cast to ", dtype_name(to_), " is not supported");
  }
  void infer(InferContext& ctx) const override {
    DType to = like_ ? ctx.dtype(1) : to_;
    if (bytes_for(ctx.dtype(0), 2) == 0 || bytes_for(to, 2) == 0)
      fail_unsupported(ctx.node.describe(), ": cast from ", dtype_name(ctx.dtype(0)), " to ", dtype_name(to), " is not supported");
    ctx.set(0, to, ctx.shape(0));
    if (is_integer(to) && is_integer(ctx.dtype(0)))
      if (auto e = ctx.shape_value(0)) ctx.set_sym_value(0, *e);
  }
  void run(RunContext& ctx) const override { convert_tensor(ctx.in(0), ctx.out(0)); }

 private:
  bool like_;
  DType to_;
};

}  // namespace

void register_elementwise_unary(OpRegistry& r) {
  const std::pair<const char*, UnKind> unary[] = {{"Neg", UnKind::Neg},
                                                  {"Abs", UnKind::Abs},
                                                  {"Sign", UnKind::Sign},
                                                  {"Sqrt", UnKind::Sqrt},
                                                  {"Reciprocal", UnKind::Reciprocal},
                                                  {"Exp", UnKind::Exp},
                                                  {"Log", UnKind::Log},
                                                  {"Erf", UnKind::Erf},
                                                  {"Tanh", UnKind::Tanh},
                                                  {"Sigmoid", UnKind::Sigmoid},
                                                  {"Relu", UnKind::Relu},
                                                  {"Cos", UnKind::Cos},
                                                  {"Sin", UnKind::Sin},
                                                  {"Tan", UnKind::Tan},
                                                  {"Acos", UnKind::Acos},
                                                  {"Asin", UnKind::Asin},
                                                  {"Atan", UnKind::Atan},
                                                  {"Cosh", UnKind::Cosh},
                                                  {"Sinh", UnKind::Sinh},
                                                  {"Acosh", UnKind::Acosh},
                                                  {"Asinh", UnKind::Asinh},
                                                  {"Atanh", UnKind::Atanh},
                                                  {"Floor", UnKind::Floor},
                                                  {"Ceil", UnKind::Ceil},
                                                  {"Round", UnKind::Round},
                                                  {"Softplus", UnKind::Softplus},
                                                  {"Softsign", UnKind::Softsign},
                                                  {"LeakyRelu", UnKind::LeakyRelu},
                                                  {"Elu", UnKind::Elu},
                                                  {"Selu", UnKind::Selu},
                                                  {"Celu", UnKind::Celu},
                                                  {"HardSigmoid", UnKind::HardSigmoid},
                                                  {"HardSwish", UnKind::HardSwish},
                                                  {"ThresholdedRelu", UnKind::ThresholdedRelu},
                                                  {"Shrink", UnKind::Shrink},
                                                  {"Mish", UnKind::Mish},
                                                  {"Gelu", UnKind::Gelu},
                                                  {"Swish", UnKind::Swish},
                                                  {"BitwiseNot", UnKind::BitNot}};
  for (const auto& [name, kind] : unary) r.add("", name, [kind = kind](const Node& n) { return std::make_unique<UnaryOp>(n, kind); });
  // ONNX Runtime's activations: FastGelu = tanh-GELU(x + bias), BiasGelu = GELU(x + bias),
  // QuickGelu = x·sigmoid(1.702·x) (Swish with its own default alpha).
  const std::pair<const char*, UnKind> contrib[] = {
      {"FastGelu", UnKind::GeluTanh}, {"BiasGelu", UnKind::Gelu}, {"Gelu", UnKind::Gelu}, {"QuickGelu", UnKind::Swish}};
  for (const auto& [name, kind] : contrib)
    r.add("com.microsoft", name, [kind = kind](const Node& n) { return std::make_unique<UnaryOp>(n, kind); });
  r.add("", "Clip", factory<ClipOp>());
  for (const char* name : {"Not", "IsNaN", "IsInf"}) r.add("", name, factory<PredicateOp>());
  r.add("", "Cast", factory<CastOp>());
  r.add("", "CastLike", factory<CastOp>());
}

}  // namespace tern
