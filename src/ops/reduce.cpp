// Reduce* ops and ArgMax/ArgMin. Axes come from an attribute until the opset where they became an
// input (13 for ReduceSum, 18 for the others).
#include <cmath>
#include <limits>

#include "kernels/cpu/elementwise.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

enum class RedKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

struct ReducePlan {
  Shape out_shape;          // with keepdims
  std::vector<int64_t> out_strides;  // per input dim: stride in the output, 0 on reduced dims
  int64_t count = 1;        // input elements per output element
};

class ReduceOp : public Op {
 public:
  ReduceOp(const Node& n, RedKind kind)
      : kind_(kind), keepdims_(n.attr_int("keepdims", 1) != 0), noop_empty_(n.attr_int("noop_with_empty_axes", 0) != 0),
        axes_attr_(n.attr_ints("axes")), axes_from_input_(n.opset >= (kind == RedKind::Sum ? 13 : 18)) {}

  void infer(InferContext& ctx) const override {
    const SymShape& in = ctx.shape(0);
    std::vector<char> red = reduced(ctx, static_cast<int64_t>(in.size()));
    SymShape out;
    for (size_t k = 0; k < in.size(); ++k) {
      if (!red[k]) out.push_back(in[k]);
      else if (keepdims_) out.push_back(Dim::known(1));
    }
    ctx.set(0, ctx.dtype(0), out);
  }

  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    std::vector<char> red = reduced(ctx.values(), x.rank());
    const size_t r = static_cast<size_t>(x.rank());
    // Output strides for each input dim (0 on reduced dims) map every input element to its output.
    std::vector<int64_t> ostride(r, 0);
    int64_t s = 1, count = 1;
    for (size_t k = r; k-- > 0;) {
      if (red[k]) { count *= x.shape()[k]; continue; }
      ostride[k] = s;
      s *= x.shape()[k];
    }
    Tensor& y = ctx.out(0);
    const int64_t n_out = y.numel();
    std::vector<double> acc(static_cast<size_t>(n_out), init());
    visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.data<T>();
      std::vector<int64_t> idx(r, 0);
      int64_t o = 0;
      for (int64_t e = 0; e < x.numel(); ++e) {
        double v = static_cast<double>(static_cast<kernels::compute_t<T>>(px[e]));
        double& a = acc[static_cast<size_t>(o)];
        switch (kind_) {
          case RedKind::Sum: case RedKind::Mean: case RedKind::LogSum: a += v; break;
          case RedKind::Max: a = (std::isnan(v) || v > a) ? v : a; break;
          case RedKind::Min: a = (std::isnan(v) || v < a) ? v : a; break;
          case RedKind::Prod: a *= v; break;
          case RedKind::L1: a += std::abs(v); break;
          case RedKind::L2: case RedKind::SumSquare: a += v * v; break;
          case RedKind::LogSumExp: a += std::exp(v); break;
        }
        for (size_t k = r; k-- > 0;) {
          o += ostride[k];
          if (++idx[k] < x.shape()[k]) break;
          o -= ostride[k] * idx[k];
          idx[k] = 0;
        }
      }
      T* py = y.data<T>();
      for (int64_t i = 0; i < n_out; ++i) {
        double a = acc[static_cast<size_t>(i)];
        if (kind_ == RedKind::Mean) a /= static_cast<double>(count);
        else if (kind_ == RedKind::L2) a = std::sqrt(a);
        else if (kind_ == RedKind::LogSum || kind_ == RedKind::LogSumExp) a = std::log(a);
        using C = kernels::compute_t<T>;
        if constexpr (std::is_integral_v<C>) {
          if (std::isinf(a)) a = a > 0 ? static_cast<double>(std::numeric_limits<C>::max())
                                       : static_cast<double>(std::numeric_limits<C>::lowest());
        }
        py[i] = static_cast<T>(static_cast<C>(a));
      }
    });
  }

 private:
  double init() const {
    switch (kind_) {
      case RedKind::Max: return -std::numeric_limits<double>::infinity();
      case RedKind::Min: return std::numeric_limits<double>::infinity();
      case RedKind::Prod: return 1.0;
      default: return 0.0;
    }
  }
  std::vector<char> reduced(const InferContext& ctx, int64_t rank) const {
    std::vector<int64_t> axes = axes_attr_;
    if (axes_from_input_ && ctx.has(1)) axes = ctx.require_value(1).to_i64_vector();
    std::vector<char> red(static_cast<size_t>(rank), 0);
    if (axes.empty()) {
      if (!noop_empty_) std::fill(red.begin(), red.end(), 1);
      return red;
    }
    for (int64_t a : axes) red[static_cast<size_t>(normalize_axis(ctx.node, a, rank))] = 1;
    return red;
  }
  RedKind kind_;
  bool keepdims_, noop_empty_;
  std::vector<int64_t> axes_attr_;
  bool axes_from_input_;
};

class ArgOp : public Op {
 public:
  ArgOp(const Node& n, bool is_max)
      : is_max_(is_max), axis_(n.attr_int("axis", 0)), keepdims_(n.attr_int("keepdims", 1) != 0),
        last_(n.attr_int("select_last_index", 0) != 0) {}
  void infer(InferContext& ctx) const override {
    SymShape s = ctx.shape(0);
    int64_t axis = normalize_axis(ctx.node, axis_, static_cast<int64_t>(s.size()));
    if (keepdims_) s[static_cast<size_t>(axis)] = Dim::known(1);
    else s.erase(s.begin() + axis);
    ctx.set(0, DType::Int64, s);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    int64_t axis = normalize_axis(ctx.node, axis_, x.rank());
    int64_t outer = 1, n = x.dim(axis), inner = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= x.dim(k);
    for (int64_t k = axis + 1; k < x.rank(); ++k) inner *= x.dim(k);
    if (n == 0) fail(ctx.node.describe(), ": cannot take ", is_max_ ? "ArgMax" : "ArgMin", " over an empty axis");
    int64_t* out = ctx.out(0).data<int64_t>();
    visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = kernels::compute_t<T>;
      const T* px = x.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t best = 0;
          C bv = static_cast<C>(px[o * n * inner + i]);
          for (int64_t j = 1; j < n; ++j) {
            C v = static_cast<C>(px[(o * n + j) * inner + i]);
            bool better = is_max_ ? (last_ ? v >= bv : v > bv) : (last_ ? v <= bv : v < bv);
            if (better) { bv = v; best = j; }
          }
          out[o * inner + i] = best;
        }
    });
  }

 private:
  bool is_max_;
  int64_t axis_;
  bool keepdims_, last_;
};

}  // namespace

void register_reduce(OpRegistry& r) {
  const std::pair<const char*, RedKind> kinds[] = {
      {"ReduceSum", RedKind::Sum}, {"ReduceMean", RedKind::Mean}, {"ReduceMax", RedKind::Max},
      {"ReduceMin", RedKind::Min}, {"ReduceProd", RedKind::Prod}, {"ReduceL1", RedKind::L1},
      {"ReduceL2", RedKind::L2}, {"ReduceLogSum", RedKind::LogSum}, {"ReduceLogSumExp", RedKind::LogSumExp},
      {"ReduceSumSquare", RedKind::SumSquare}};
  for (const auto& [name, kind] : kinds)
    r.add("", name, [kind = kind](const Node& n) { return std::make_unique<ReduceOp>(n, kind); });
  r.add("", "ArgMax", [](const Node& n) { return std::make_unique<ArgOp>(n, true); });
  r.add("", "ArgMin", [](const Node& n) { return std::make_unique<ArgOp>(n, false); });
}

}  // namespace tern
