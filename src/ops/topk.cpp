// TopK: the k largest (or smallest) values along an axis and their indices; ties keep the lower index.
#include <algorithm>
#include <numeric>

#include "kernels/cpu/elementwise.h"
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
    int64_t outer = 1, n = x.dim(axis), inner = 1;
    for (int64_t a = 0; a < axis; ++a) outer *= x.dim(a);
    for (int64_t a = axis + 1; a < x.rank(); ++a) inner *= x.dim(a);
    int64_t* idx_out = ctx.out(1).data<int64_t>();
    visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = kernels::compute_t<T>;
      const T* px = x.data<T>();
      T* pv = ctx.out(0).data<T>();
      std::vector<int64_t> order(static_cast<size_t>(n));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          auto val = [&](int64_t j) { return static_cast<C>(px[(o * n + j) * inner + i]); };
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
            return largest_ ? val(a) > val(b) : val(a) < val(b);
          });
          for (int64_t j = 0; j < k; ++j) {
            const int64_t e = (o * k + j) * inner + i;
            pv[e] = px[(o * n + order[static_cast<size_t>(j)]) * inner + i];
            idx_out[e] = order[static_cast<size_t>(j)];
          }
        }
    });
  }

 private:
  int64_t axis_;
  bool largest_;
};

}  // namespace

void register_topk(OpRegistry& r) { r.add("", "TopK", factory<TopKOp>()); }

}  // namespace tern
