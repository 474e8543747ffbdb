// MatMulNBits (com.microsoft): Y = A · dequant(B)ᵀ (+ bias), B block-quantized to 4 or 8 bits per
// ONNX Runtime's layout. A few rows (decode) stream the packed weights directly (gemv_nbits); more rows,
// and layouts the GEMV does not take, run the panel GEMM, which dequantizes one block of 16 columns at a
// time into L1 (no dequantized copy of the matrix). accuracy_level 4 asks for int8 activations: the
// decode rows then run gemv_nbits_i8 (as ONNX Runtime does; `--activations` overrides it either way).
#include "kernels/cpu/nbits.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/gemv.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class MatMulNBitsOp : public Op {
 public:
  explicit MatMulNBitsOp(const Node& n)
      : K_(n.attr_int("K", 0)), N_(n.attr_int("N", 0)), bits_(n.attr_int("bits", 4)), block_(n.attr_int("block_size", 0)),
        accuracy_level_(n.attr_int("accuracy_level", 0)) {
    if (K_ <= 0 || N_ <= 0) fail(n.describe(), ": attributes K and N are required");
    if (bits_ != 4 && bits_ != 8) fail_unsupported(n.describe(), ": bits = ", bits_, " (tern supports 4 and 8)");
    if (block_ < 16 || (block_ & (block_ - 1)) != 0) fail(n.describe(), ": block_size must be a power of 2 >= 16, got ", block_);
  }
  std::vector<int> prepack(const std::vector<const Tensor*>& /*constants*/, const PrepackOptions& options) override {
    activations_ = nbits_activations(options.activations, accuracy_level_ == 4);
    return {};
  }
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState*) const override {
    double bytes = static_cast<double>(out[0].nbytes());
    for (const Tensor* t : in)
      if (t) bytes += static_cast<double>(t->nbytes());  // activations, packed blocks, scales, zero points
    return {2.0 * static_cast<double>(in[0]->numel()) * static_cast<double>(N_), bytes};
  }
  std::string kernel(const std::vector<const Tensor*>& in) const override {
    // The dispatch looks at the shape and at which zero-point form is given, not at the data.
    static const uint8_t any_packed = 0;
    static const float any_float = 0;
    kernels::NBitsWeights w;
    w.N = N_, w.K = K_, w.bits = bits_, w.block = block_;
    if (in.size() > 3 && in[3] && in[3]->dtype() == DType::UInt8) w.zp_packed = &any_packed;
    else if (in.size() > 3 && in[3]) w.zp_float = &any_float;
    return kernels::matmul_nbits_kernel(in[0]->numel() / K_, w, activations_);
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
    Tensor scales_f32, zp_f32, a_f32, y_f32;  // conversions, only for inputs that are not float32
    const Tensor& scales = as_dtype(ctx.in(2), DType::Float32, scales_f32);
    if (scales.numel() != N_ * k_blocks) fail(ctx.node.describe(), ": scales must have N·k_blocks = ", N_ * k_blocks, " values");
    kernels::NBitsWeights w;
    w.N = N_; w.K = K_; w.bits = bits_; w.block = block_;
    w.data = B.data<uint8_t>();
    w.scales = scales.data<float>();
    if (ctx.has(3)) {
      const Tensor& zp = ctx.in(3);
      if (zp.dtype() == DType::UInt8) {
        if (zp.numel() != N_ * ((k_blocks * bits_ + 7) / 8)) fail(ctx.node.describe(), ": packed zero_points have the wrong size");
        w.zp_packed = zp.data<uint8_t>();
      } else {
        const Tensor& zpf = as_dtype(zp, DType::Float32, zp_f32);
        if (zpf.numel() != N_ * k_blocks) fail(ctx.node.describe(), ": zero_points must have N·k_blocks values");
        w.zp_float = zpf.data<float>();
      }
    }
    const Tensor& A = as_dtype(ctx.in(0), DType::Float32, a_f32);
    const int64_t M = A.numel() / K_;
    Tensor& out = ctx.out(0);
    if (out.dtype() != DType::Float32) y_f32 = Tensor(DType::Float32, out.shape());
    float* Y = out.dtype() == DType::Float32 ? out.data<float>() : y_f32.data<float>();
    kernels::matmul_nbits(A.data<float>(), M, w, Y, activations_);
    if (ctx.has(5)) {  // bias [N]
      Tensor bias_f32;
      const Tensor& bias = as_dtype(ctx.in(5), DType::Float32, bias_f32);
      kernels::binary_broadcast(Y, {M, N_}, bias.data<float>(), {N_}, Y, {M, N_}, [](float a, float b) { return a + b; });
    }
    if (y_f32.defined()) convert_tensor(y_f32, out);
  }

 private:
  int64_t K_, N_, bits_, block_, accuracy_level_;
  kernels::NBitsActivations activations_ = kernels::NBitsActivations::Float32;  // set by prepack
};

}  // namespace

void register_matmul_nbits(OpRegistry& r) { r.add("com.microsoft", "MatMulNBits", factory<MatMulNBitsOp>()); }

}  // namespace tern
