// TensorScatter (opset 24): writes `update` into a copy of `past_cache` along `axis`, at per-batch
// offsets write_indices[b] (mode "circular" wraps around the cache length).
#include <cstring>

#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class TensorScatterOp : public Op {
 public:
  explicit TensorScatterOp(const Node& n) : axis_(n.attr_int("axis", -2)), circular_(n.attr_string("mode", "linear") == "circular") {
    std::string mode = n.attr_string("mode", "linear");
    if (mode != "linear" && mode != "circular") fail(n.describe(), ": mode must be linear or circular, got '", mode, "'");
  }
  void infer(InferContext& ctx) const override {
    if (ctx.dtype(0) != ctx.dtype(1)) ctx.fail("past_cache and update have different types");
    ctx.same_as_input(0, 0);
  }
  void run(RunContext& ctx) const override {
    const Tensor &past = ctx.in(0), &upd = ctx.in(1);
    Tensor& out = ctx.out(0);
    const int64_t r = past.rank();
    const int64_t axis = normalize_axis(ctx.node, axis_, r);
    if (axis == 0) fail(ctx.node.describe(), ": axis must not be the batch axis");
    if (upd.rank() != r) fail(ctx.node.describe(), ": update rank differs from past_cache rank");
    for (int64_t k = 0; k < r; ++k)
      if (k == axis ? upd.dim(k) > past.dim(k) : upd.dim(k) != past.dim(k))
        fail(ctx.node.describe(), ": update ", shape_str(upd.shape()), " does not fit past_cache ", shape_str(past.shape()));
    std::memcpy(out.raw(), past.raw(), past.nbytes());
    const int64_t B = past.dim(0), max_len = past.dim(axis), len = upd.dim(axis);
    std::vector<int64_t> widx(static_cast<size_t>(B), 0);
    if (ctx.has(2)) widx = ctx.in(2).to_i64_vector();
    if (static_cast<int64_t>(widx.size()) != B) fail(ctx.node.describe(), ": write_indices must have one entry per batch");
    int64_t mid = 1, inner = 1;  // dims between batch and axis; dims after axis
    for (int64_t k = 1; k < axis; ++k) mid *= past.dim(k);
    for (int64_t k = axis + 1; k < r; ++k) inner *= past.dim(k);
    const size_t row = bytes_for(past.dtype(), inner);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t m = 0; m < mid; ++m)
        for (int64_t s = 0; s < len; ++s) {
          int64_t at = widx[static_cast<size_t>(b)] + s;
          if (circular_) at = ((at % max_len) + max_len) % max_len;
          if (at < 0 || at >= max_len) fail(ctx.node.describe(), ": write index ", at, " is outside the cache length ", max_len);
          std::memcpy(static_cast<char*>(out.raw()) + static_cast<size_t>((b * mid + m) * max_len + at) * row,
                      static_cast<const char*>(upd.raw()) + static_cast<size_t>((b * mid + m) * len + s) * row, row);
        }
  }

 private:
  int64_t axis_;
  bool circular_;
};

}  // namespace

void register_tensor_scatter(OpRegistry& r) { r.add("", "TensorScatter", factory<TensorScatterOp>()); }

}  // namespace tern
