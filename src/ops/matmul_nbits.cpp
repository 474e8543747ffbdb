// MatMulNBits (com.microsoft): Y = A · dequant(B)ᵀ (+ bias), B block-quantized to 4 or 8 bits per
// ONNX Runtime's layout. Reference path: the weights are dequantized to float, then the GEMM runs.
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class MatMulNBitsOp : public Op {
 public:
  explicit MatMulNBitsOp(const Node& n)
      : K_(n.attr_int("K", 0)), N_(n.attr_int("N", 0)), bits_(n.attr_int("bits", 4)), block_(n.attr_int("block_size", 0)) {
    if (K_ <= 0 || N_ <= 0) fail(n.describe(), ": attributes K and N are required");
    if (bits_ != 4 && bits_ != 8) fail_unsupported(n.describe(), ": bits = ", bits_, " (tern supports 4 and 8)");
    if (block_ < 16 || (block_ & (block_ - 1)) != 0) fail(n.describe(), ": block_size must be a power of 2 >= 16, got ", block_);
  }
  void infer(InferContext& ctx) const override {
    SymShape a = ctx.shape(0);
    if (a.empty() || (a.back().is_known() && a.back().value != K_)) ctx.fail("A's last dimension must be K = ", K_);
    if (ctx.dtype(1) != DType::UInt8) ctx.fail("B must be uint8");
    if (ctx.has(4)) fail_unsupported(ctx.node.describe(), ": g_idx (act-order) is not supported");
    a.back() = Dim::known(N_);
    ctx.set(0, ctx.dtype(0), a);
  }
  void run(RunContext& ctx) const override {
    const int64_t k_blocks = (K_ + block_ - 1) / block_;
    const Tensor& B = ctx.in(1);
    if (B.numel() != N_ * k_blocks * (block_ * bits_ / 8))
      fail(ctx.node.describe(), ": B has ", B.numel(), " bytes, N·k_blocks·blob needs ", N_ * k_blocks * (block_ * bits_ / 8));
    Tensor scales = cast_to(ctx.in(2), DType::Float32);
    if (scales.numel() != N_ * k_blocks) fail(ctx.node.describe(), ": scales must have N·k_blocks = ", N_ * k_blocks, " values");
    kernels::NBitsWeights w;
    w.N = N_; w.K = K_; w.bits = bits_; w.block = block_;
    w.data = B.data<uint8_t>();
    w.scales = scales.data<float>();
    Tensor zpf;
    if (ctx.has(3)) {
      const Tensor& zp = ctx.in(3);
      if (zp.dtype() == DType::UInt8) {
        if (zp.numel() != N_ * ((k_blocks * bits_ + 7) / 8)) fail(ctx.node.describe(), ": packed zero_points have the wrong size");
        w.zp_packed = zp.data<uint8_t>();
      } else {
        zpf = cast_to(zp, DType::Float32);
        if (zpf.numel() != N_ * k_blocks) fail(ctx.node.describe(), ": zero_points must have N·k_blocks values");
        w.zp_float = zpf.data<float>();
      }
    }
    Tensor W(DType::Float32, {K_, N_});
    kernels::dequantize_nbits_transposed(w, W.data<float>());
    Tensor A = cast_to(ctx.in(0), DType::Float32);
    const int64_t M = A.numel() / K_;
    Tensor Y = ctx.out(0).dtype() == DType::Float32 ? ctx.out(0) : Tensor(DType::Float32, ctx.out(0).shape());
    kernels::gemm<float>(false, false, M, N_, K_, 1.0f, A.data<float>(), K_, W.data<float>(), N_, 0.0f, Y.data<float>(), N_);
    if (ctx.has(5)) {  // bias [N]
      Tensor bias = cast_to(ctx.in(5), DType::Float32);
      kernels::binary_broadcast(Y.data<float>(), {M, N_}, bias.data<float>(), {N_}, Y.data<float>(), {M, N_},
                                [](float a, float b) { return a + b; });
    }
    if (Y.raw() != ctx.out(0).raw()) convert_tensor(Y, ctx.out(0));
  }

 private:
  int64_t K_, N_, bits_, block_;
};

}  // namespace

void register_matmul_nbits(OpRegistry& r) { r.add("com.microsoft", "MatMulNBits", factory<MatMulNBitsOp>()); }

}  // namespace tern
