// SwiGLU (domain "tern"): act(gate) · up, made by fuse_swiglu from Sigmoid → Mul → Mul (act = SiLU) or
// Gelu(approximate tanh) → Mul (attribute activation "gelu_tanh": GeGLU, Gemma's MLP). Inputs: gate and up of
// one shape, or one packed [.., 2·F] input whose first half is gate and second half up (what
// fuse_shared_input_matmuls makes of gate_proj and up_proj sharing their input).
#include "kernels/cpu/swiglu.h"
#include "kernels/cpu/kernel_table.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class SwiGluOp : public Op, public CostedOp {
 public:
  std::string kernel(const std::vector<const Tensor*>&, kernels::Isa isa) const override {
    return kernels::profile_name("swiglu_rows", kernels::kernel_table(isa).swiglu_rows.name);
  }
  explicit SwiGluOp(const Node& n) {
    const std::string act = n.attr_string("activation", "silu");
    if (act == "gelu_tanh") act_ = kernels::GateActivation::GeluTanh;
    else if (act != "silu") fail(n.describe(), ": activation must be 'silu' or 'gelu_tanh', got '", act, "'");
  }
  void infer(InferContext& ctx) const override {
    SymShape s = ctx.shape(0);
    if (s.empty()) ctx.fail("input must have rank >= 1");
    if (ctx.has(1)) {
      if (ctx.shape(1).size() != s.size()) ctx.fail("gate and up must have one shape");
    } else if (s.back().is_known()) {
      if (s.back().value % 2) ctx.fail("a packed input needs an even last dim, got ", s.back().value);
      s.back() = Dim::known(s.back().value / 2);
    } else {
      s.back() = Dim{};
    }
    ctx.set(0, ctx.dtype(0), s);
  }
  void run(RunContext& ctx) const override {
    const bool packed = !ctx.has(1);
    Tensor x_scratch, u_scratch;  // float32 copies, only for float16 models
    const Tensor& x = as_dtype(ctx.in(0), DType::Float32, x_scratch);
    const Tensor& u = packed ? x : as_dtype(ctx.in(1), DType::Float32, u_scratch);
    if (!packed && x.shape() != u.shape())
      fail(ctx.node.describe(), ": gate ", shape_str(x.shape()), " and up ", shape_str(u.shape()), " differ");
    Tensor& y = ctx.out(0);
    Tensor y_scratch;
    Tensor& yf = y.dtype() == DType::Float32 ? y : (y_scratch = Tensor(DType::Float32, y.shape()));
    const int64_t n = y.dim(-1), rows = n ? y.numel() / n : 0;
    const int64_t stride = packed ? 2 * n : n;
    kernels::swiglu_rows(ctx.cpu, x.data<float>(), (packed ? x.data<float>() + n : u.data<float>()), stride, yf.data<float>(), rows, n,
                         act_);
    if (yf.raw() != y.raw()) convert_tensor(yf, y);
  }

 private:
  kernels::GateActivation act_ = kernels::GateActivation::Silu;
};

}  // namespace

void register_swiglu(OpRegistry& r) { r.add("tern", "SwiGLU", factory<SwiGluOp>()); }

}  // namespace tern
