// Trilu: keep the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims, zero the rest.
#include <cstring>

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
    const int64_t N = x.dim(-2), M = x.dim(-1), mats = N * M ? x.numel() / (N * M) : 0;
    const size_t es = dtype_size(x.dtype());
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(ctx.out(0).raw());
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < M; ++j) {
          const size_t off = static_cast<size_t>((m * N + i) * M + j) * es;
          const bool keep = upper_ ? (j - i >= k) : (j - i <= k);
          if (keep) std::memcpy(dst + off, src + off, es);
          else std::memset(dst + off, 0, es);
        }
  }

 private:
  bool upper_;
};

}  // namespace

void register_trilu(OpRegistry& r) { r.add("", "Trilu", factory<TriluOp>()); }

}  // namespace tern
