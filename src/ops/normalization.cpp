// LayerNormalization (opset 17) and RMSNormalization (opset 23): normalize over dims [axis, rank),
// computed in float32 whatever the storage type.
#include "kernels/cpu/copy.h"
#include "kernels/cpu/norm.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class NormOp : public Op {
 public:
  NormOp(const Node& n, bool rms) : rms_(rms), axis_(n.attr_int("axis", -1)), eps_(n.attr_float("epsilon", 1e-5f)) {}
  void infer(InferContext& ctx) const override {
    const SymShape& x = ctx.shape(0);
    int64_t axis = normalize_axis(ctx.node, axis_, static_cast<int64_t>(x.size()));
    ctx.same_as_input(0, 0);
    SymShape stat = x;
    for (size_t k = static_cast<size_t>(axis); k < stat.size(); ++k) stat[k] = Dim::known(1);
    ctx.set(1, DType::Float32, stat);  // Mean (LayerNorm) or InvStdDev (RMSNorm has none)
    ctx.set(2, DType::Float32, stat);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    int64_t axis = normalize_axis(ctx.node, axis_, x.rank());
    int64_t n = 1;
    for (int64_t k = axis; k < x.rank(); ++k) n *= x.dim(k);
    const int64_t rows = n ? x.numel() / n : 0;
    Tensor xf = cast_to(x, DType::Float32);
    Tensor yf = ctx.out(0).dtype() == DType::Float32 ? ctx.out(0) : Tensor(DType::Float32, x.shape());
    kernels::NormArgs a;
    a.rows = rows;
    a.n = n;
    a.eps = eps_;
    a.rms = rms_;
    Tensor scale = param(ctx, 1, n), bias = param(ctx, 2, n);
    if (scale.defined()) { a.scale = scale.data<float>(); a.scale_stride = scale.numel() == n ? 0 : n; }
    if (bias.defined()) { a.bias = bias.data<float>(); a.bias_stride = bias.numel() == n ? 0 : n; }
    if (!rms_ && ctx.outputs.size() > 1 && ctx.out(1).defined()) a.mean_out = ctx.out(1).data<float>();
    if (!rms_ && ctx.outputs.size() > 2 && ctx.out(2).defined()) a.inv_std_out = ctx.out(2).data<float>();
    kernels::normalize_rows(xf.data<float>(), yf.data<float>(), a);
    if (yf.raw() != ctx.out(0).raw()) convert_tensor(yf, ctx.out(0));
  }

 private:
  // Scale (1) or bias (2) as float32: as is when it covers one row, else broadcast to X's shape.
  Tensor param(const RunContext& ctx, int i, int64_t n) const {
    if (rms_ && i == 2) return Tensor();
    if (!ctx.has(i)) return Tensor();
    Tensor p = cast_to(ctx.in(i), DType::Float32);
    if (p.numel() == n) return p;
    const Tensor& x = ctx.in(0);
    broadcast_shapes(ctx.node, sym_shape(p.shape()), sym_shape(x.shape()));
    Tensor full(DType::Float32, x.shape());
    kernels::broadcast_copy(p.raw(), p.shape(), full.raw(), full.shape(), 4);
    return full;
  }
  bool rms_;
  int64_t axis_;
  float eps_;
};

}  // namespace

void register_normalization(OpRegistry& r) {
  r.add("", "LayerNormalization", [](const Node& n) { return std::make_unique<NormOp>(n, false); });
  r.add("", "RMSNormalization", [](const Node& n) { return std::make_unique<NormOp>(n, true); });
}

}  // namespace tern
