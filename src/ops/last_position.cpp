// LastPosition (domain "tern"): x[:, -1:, :] of [B, S, D] activations, made by
// slice_logits_to_last_position so a prefill projects only the position generation reads.
#include <cstring>

#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class LastPositionOp : public Op, public CostedOp {
 public:
  explicit LastPositionOp(const Node&) {}
  OpCost cost(const std::vector<const Tensor*>&, const std::vector<Tensor>& out, const OpState*) const override {
    return {0, 2.0 * static_cast<double>(out[0].nbytes())};  // one row read, one written
  }
  void infer(InferContext& ctx) const override {
    SymShape s = ctx.shape(0);
    if (s.size() != 3) ctx.fail("input must be [batch, sequence, hidden], got ", sym_shape_str(s));
    if (s[1].is_known() && s[1].value < 1) ctx.fail("a sequence of ", s[1].value, " positions has no last one");
    s[1] = Dim::known(1);
    ctx.set(0, ctx.dtype(0), s);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const int64_t B = x.dim(0), S = x.dim(1);
    if (S < 1) fail(ctx.node.describe(), ": a sequence of 0 positions has no last one");
    const size_t row = x.nbytes() / static_cast<size_t>(B * S);
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(static_cast<char*>(ctx.out(0).raw()) + static_cast<size_t>(b) * row,
                  static_cast<const char*>(x.raw()) + static_cast<size_t>(b * S + S - 1) * row, row);
  }
};

}  // namespace

void register_last_position(OpRegistry& r) { r.add("tern", "LastPosition", factory<LastPositionOp>()); }

}  // namespace tern
