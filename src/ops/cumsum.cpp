// CumSum along one axis (axis is an input tensor), optionally exclusive and/or reversed.
#include "kernels/cpu/reduce.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class CumSumOp : public Op {
 public:
  explicit CumSumOp(const Node& n) : exclusive_(n.attr_int("exclusive", 0) != 0), reverse_(n.attr_int("reverse", 0) != 0) {}
  void infer(InferContext& ctx) const override { ctx.same_as_input(0, 0); }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t axis = normalize_axis(ctx.node, ctx.in(1).at_i64(0), x.rank());
    const AxisSplit at = split_at_axis(x.shape(), axis);  // not a structured binding: clang 14 cannot capture one
    const int64_t outer = at.outer, n = at.n, inner = at.inner;
    visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::cumulative_sum(x.data<T>(), ctx.out(0).data<T>(), outer, n, inner, exclusive_, reverse_);
    });
  }

 private:
  bool exclusive_, reverse_;
};

}  // namespace

void register_cumsum(OpRegistry& r) { r.add("", "CumSum", factory<CumSumOp>()); }

}  // namespace tern
