// CumSum along one axis (axis is an input tensor), optionally exclusive and/or reversed.
#include "kernels/cpu/elementwise.h"
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
    int64_t outer = 1, n = x.dim(axis), inner = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= x.dim(k);
    for (int64_t k = axis + 1; k < x.rank(); ++k) inner *= x.dim(k);
    visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = kernels::compute_t<T>;
      const T* px = x.data<T>();
      T* py = ctx.out(0).data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          C acc = C(0);
          for (int64_t s = 0; s < n; ++s) {
            const int64_t j = reverse_ ? n - 1 - s : s;
            const int64_t e = (o * n + j) * inner + i;
            const C v = static_cast<C>(px[e]);
            if (exclusive_) { py[e] = static_cast<T>(acc); acc = static_cast<C>(acc + v); }
            else { acc = static_cast<C>(acc + v); py[e] = static_cast<T>(acc); }
          }
        }
    });
  }

 private:
  bool exclusive_, reverse_;
};

}  // namespace

void register_cumsum(OpRegistry& r) { r.add("", "CumSum", factory<CumSumOp>()); }

}  // namespace tern
