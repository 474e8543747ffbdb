// TopK: the k largest (or smallest) values along an axis and their indices; ties keep the lower index.
#include "kernels/cpu/reduce.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class TopKOp : public Op {
 public:
  explicit TopKOp(const Node& n) : axis_(n.attr_int("axis", -1)), largest_(n.attr_int("largest", 1) != 0) {}
  void infer(InferContext& ctx) const override {
    SymShape s = ctx.shape(0);
    const int64_t axis = normalize_axis(ctx.node, axis_, static_cast<int64_t>(s.size()));
    const int64_t k = ctx.require_value(1).at_i64(0);
    if (k < 0 || (s[static_cast<size_t>(axis)].is_known() && k > s[static_cast<size_t>(axis)].value))
      ctx.fail("k = ", k, " is out of range for axis of size ", s[static_cast<size_t>(axis)].str());
    s[static_cast<size_t>(axis)] = Dim::known(k);
    ctx.set(0, ctx.dtype(0), s);
    ctx.set(1, DType::Int64, s);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t axis = normalize_axis(ctx.node, axis_, x.rank());
    const int64_t k = ctx.in(1).at_i64(0);
    const AxisSplit at = split_at_axis(x.shape(), axis);  // not a structured binding: clang 14 cannot capture one
    const int64_t outer = at.outer, n = at.n, inner = at.inner;
    Tensor scratch;  // (the indices, when the node omits them: the session gives omitted outputs no memory)
    Tensor& indices = ctx.outputs.size() > 1 && ctx.out(1).defined() ? ctx.out(1) : (scratch = Tensor(DType::Int64, ctx.out(0).shape()));
    visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::top_k(x.data<T>(), outer, n, inner, k, largest_, ctx.out(0).data<T>(), indices.data<int64_t>());
    });
  }

 private:
  int64_t axis_;
  bool largest_;
};

}  // namespace

void register_topk(OpRegistry& r) { r.add("", "TopK", factory<TopKOp>()); }

}  // namespace tern
