// Reduce* ops and ArgMax/ArgMin. Axes come from an attribute until the opset where they became an
// input (13 for ReduceSum, 18 for the others).
#include "kernels/cpu/reduce.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

using RedKind = kernels::ReduceKind;

class ReduceOp : public Op {
 public:
  ReduceOp(const Node& n, RedKind kind)
      : kind_(kind),
        keepdims_(n.attr_int("keepdims", 1) != 0),
        noop_empty_(n.attr_int("noop_with_empty_axes", 0) != 0),
        axes_attr_(n.attr_ints("axes")),
        axes_from_input_(n.opset >= (kind == RedKind::Sum ? 13 : 18)) {}

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
    visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::reduce_axes(x.data<T>(), x.shape(), red, kind_, ctx.out(0).data<T>());
    });
  }

 private:
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
      : is_max_(is_max),
        axis_(n.attr_int("axis", 0)),
        keepdims_(n.attr_int("keepdims", 1) != 0),
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
    const AxisSplit at = split_at_axis(x.shape(), axis);  // not a structured binding: clang 14 cannot capture one
    const int64_t outer = at.outer, n = at.n, inner = at.inner;
    if (n == 0) fail(ctx.node.describe(), ": cannot take ", is_max_ ? "ArgMax" : "ArgMin", " over an empty axis");
    visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::arg_reduce(x.data<T>(), outer, n, inner, is_max_, last_, ctx.out(0).data<int64_t>());
    });
  }

 private:
  bool is_max_;
  int64_t axis_;
  bool keepdims_, last_;
};

}  // namespace

void register_reduce(OpRegistry& r) {
  const std::pair<const char*, RedKind> kinds[] = {{"ReduceSum", RedKind::Sum},
                                                   {"ReduceMean", RedKind::Mean},
                                                   {"ReduceMax", RedKind::Max},
                                                   {"ReduceMin", RedKind::Min},
                                                   {"ReduceProd", RedKind::Prod},
                                                   {"ReduceL1", RedKind::L1},
                                                   {"ReduceL2", RedKind::L2},
                                                   {"ReduceLogSum", RedKind::LogSum},
                                                   {"ReduceLogSumExp", RedKind::LogSumExp},
                                                   {"ReduceSumSquare", RedKind::SumSquare}};
  for (const auto& [name, kind] : kinds) r.add("", name, [kind = kind](const Node& n) { return std::make_unique<ReduceOp>(n, kind); });
  r.add("", "ArgMax", [](const Node& n) { return std::make_unique<ArgOp>(n, true); });
  r.add("", "ArgMin", [](const Node& n) { return std::make_unique<ArgOp>(n, false); });
}

}  // namespace tern
