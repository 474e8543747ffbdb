// Trilu: keep the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims, zero the rest.
#include "kernels/cpu/reduce.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class TriluOp : public Op {
 public:
  explicit TriluOp(const Node& n) : upper_(n.attr_int("upper", 1) != 0) {}
  void infer(InferContext& ctx) const override {
    if (ctx.rank(0) < 2) ctx.fail("input must have rank >= 2");
    ctx.same_as_input(0, 0);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t k = ctx.has(1) ? ctx.in(1).at_i64(0) : 0;
    const int64_t N = x.dim(-2), M = x.dim(-1), mats = (N * M != 0) ? x.numel() / (N * M) : 0;
    kernels::triangle(x.raw(), ctx.out(0).raw(), mats, N, M, k, upper_, dtype_size(x.dtype()));
  }

 private:
  bool upper_;
};

}  // namespace

void register_trilu(OpRegistry& r) { r.add("", "Trilu", factory<TriluOp>()); }

}  // namespace tern
