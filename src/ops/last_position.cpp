// LastPosition (domain "tern"): x[:, -1:, :] of [B, S, D] activations, made by
// slice_logits_to_last_position so a prefill projects only the position generation reads. Optional input
// `positions` (int64 [n], the graph input kLogitsPositionsInput): x[:, positions, :] instead, each counted from
// the end when negative — a speculative step's verification reads the logits of its last n positions.
#include <cstring>

#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class LastPositionOp : public Op, public CostedOp {
 public:
  explicit LastPositionOp(const Node&) {}
  OpCost cost(const std::vector<const Tensor*>&, const std::vector<Tensor>& out, const OpState*) const override {
    return {0, 2.0 * static_cast<double>(out[0].nbytes())};  // the rows read, as many written
  }
  void infer(InferContext& ctx) const override {
    SymShape s = ctx.shape(0);
    if (s.size() != 3) ctx.fail("input must be [batch, sequence, hidden], got ", sym_shape_str(s));
    if (s[1].is_known() && s[1].value < 1) ctx.fail("a sequence of ", s[1].value, " positions has no last one");
    if (ctx.has(1) && (ctx.dtype(1) != DType::Int64 || ctx.rank(1) != 1))
      ctx.fail("positions must be int64 [n], got ", dtype_name(ctx.dtype(1)), " ", sym_shape_str(ctx.shape(1)));
    s[1] = ctx.has(1) ? ctx.dim(1, 0) : Dim::known(1);
    ctx.set(0, ctx.dtype(0), s);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t B = x.dim(0), S = x.dim(1);
    if (S < 1) fail(ctx.node.describe(), ": a sequence of 0 positions has no last one");
    const int64_t last = -1;
    const int64_t* at = ctx.has(1) ? ctx.in(1).data<int64_t>() : &last;
    const int64_t n = ctx.has(1) ? ctx.in(1).numel() : 1;
    const size_t row = x.nbytes() / static_cast<size_t>(B * S);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t s = at[j] < 0 ? S + at[j] : at[j];
      if (s < 0 || s >= S) fail(ctx.node.describe(), ": position ", at[j], " is outside the run's ", S, " positions");
      for (int64_t b = 0; b < B; ++b)
        std::memcpy(static_cast<char*>(ctx.out(0).raw()) + static_cast<size_t>(b * n + j) * row,
                    static_cast<const char*>(x.raw()) + static_cast<size_t>(b * S + s) * row, row);
    }
  }
};

}  // namespace

void register_last_position(OpRegistry& r) { r.add("tern", "LastPosition", factory<LastPositionOp>()); }

}  // namespace tern
