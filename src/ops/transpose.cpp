// Transpose: permute dimensions (default: reverse them).
#include "kernels/cpu/copy.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class TransposeOp : public Op {
 public:
  explicit TransposeOp(const Node& n) : perm_(n.attr_ints("perm")) {}
  void infer(InferContext& ctx) const override {
    const SymShape& in = ctx.shape(0);
    std::vector<int64_t> perm = perm_of(ctx.node, static_cast<int64_t>(in.size()));
    SymShape out;
    for (int64_t p : perm) out.push_back(in[static_cast<size_t>(p)]);
    ctx.set(0, ctx.dtype(0), out);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    kernels::transpose(x.raw(), x.shape(), perm_of(ctx.node, x.rank()), ctx.out(0).raw(), dtype_size(x.dtype()));
  }

 private:
  std::vector<int64_t> perm_of(const Node& n, int64_t rank) const {
    std::vector<int64_t> p = perm_;
    if (p.empty())
      for (int64_t i = rank - 1; i >= 0; --i) p.push_back(i);
    if (static_cast<int64_t>(p.size()) != rank) fail(n.describe(), ": perm has ", p.size(), " entries for rank ", rank);
    std::vector<char> seen(static_cast<size_t>(rank), 0);
    for (int64_t& a : p) {
      a = normalize_axis(n, a, rank);
      if (seen[static_cast<size_t>(a)]++) fail(n.describe(), ": perm repeats axis ", a);
    }
    return p;
  }
  std::vector<int64_t> perm_;
};

}  // namespace

void register_transpose(OpRegistry& r) { r.add("", "Transpose", factory<TransposeOp>()); }

}  // namespace tern
