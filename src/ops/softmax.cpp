// Softmax, LogSoftmax, Hardmax. Before opset 13 the input is coerced to 2-D at `axis`
// ([d0..d_axis-1] x [d_axis..]); from 13 the op runs along the single axis.
#include "kernels/cpu/softmax.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class SoftmaxOp : public Op {
 public:
  SoftmaxOp(const Node& n, kernels::SoftmaxKind kind)
      : kind_(kind), axis_(n.attr_int("axis", n.opset >= 13 ? -1 : 1)), coerce_2d_(n.opset < 13) {}
  void infer(InferContext& ctx) const override {
    if (!is_float(ctx.dtype(0))) ctx.fail("needs a floating-point input");
    ctx.same_as_input(0, 0);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    int64_t r = x.rank();
    int64_t axis = r == 0 ? 0 : normalize_axis(ctx.node, axis_, r);
    int64_t outer = 1, n = 1, inner = 1;
    for (int64_t k = 0; k < r; ++k) {
      int64_t d = x.dim(k);
      if (k < axis) outer *= d;
      else if (k == axis || coerce_2d_) n *= d;
      else inner *= d;
    }
    Tensor xf = cast_to(x, DType::Float32);
    Tensor& y = ctx.out(0);
    Tensor yf = y.dtype() == DType::Float32 ? y : Tensor(DType::Float32, y.shape());
    kernels::softmax(xf.data<float>(), yf.data<float>(), outer, n, inner, kind_);
    if (yf.raw() != y.raw()) convert_tensor(yf, y);
  }

 private:
  kernels::SoftmaxKind kind_;
  int64_t axis_;
  bool coerce_2d_;
};

}  // namespace

void register_softmax(OpRegistry& r) {
  using K = kernels::SoftmaxKind;
  for (auto [name, kind] : {std::pair{"Softmax", K::Softmax}, std::pair{"LogSoftmax", K::LogSoftmax}, std::pair{"Hardmax", K::Hardmax}})
    r.add("", name, [kind = kind](const Node& n) { return std::make_unique<SoftmaxOp>(n, kind); });
}

}  // namespace tern
