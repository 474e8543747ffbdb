// MatMulBnb4 (com.microsoft): Y = A · dequant(B)ᵀ, B bitsandbytes' NF4 or FP4 codes of Wᵀ [N, K] in blocks sharing an
// absmax (kernels/cpu/bnb4.h) — transformers.js's model_bnb4.onnx. The codes stay as the file holds them and are read
// as they are used: a decode token streams half a byte a weight (ONNX Runtime dequantizes to float32 at each run).
#include "core/checked_math.h"
#include "kernels/cpu/bnb4.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class MatMulBnb4Op : public Op, public CostedOp {
 public:
  explicit MatMulBnb4Op(const Node& n)
      : K_(n.attr_int("K", 0)), N_(n.attr_int("N", 0)), block_(n.attr_int("block_size", 0)), type_(n.attr_int("quant_type", 1)) {
    if (K_ <= 0 || N_ <= 0) fail(n.describe(), ": attributes K and N are required");
    if (block_ < 16 || (block_ & (block_ - 1)) != 0) fail(n.describe(), ": block_size must be a power of 2 >= 16, got ", block_);
    if (type_ != 0 && type_ != 1) fail(n.describe(), ": quant_type ", type_, " is neither 0 (FP4) nor 1 (NF4)");
    if (n.attr_int("transB", 1) != 1) fail_unsupported(n.describe(), ": transB 0 (ONNX Runtime, too, reads B as Wᵀ)");
    const std::string what = n.describe() + ": K · N";  // (the codes' count, and a prefill's slice of rows)
    checked_mul(checked_mul(K_, N_, what.c_str()), int64_t{4}, what.c_str());
  }
  std::string kernel(const std::vector<const Tensor*>& in, kernels::Isa isa) const override {
    return kernels::matmul_bnb4_kernel(in[0]->numel() / K_, weights(*in[1], *in[2]), isa);
  }
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState*) const override {
    const double M = static_cast<double>(in[0]->numel() / K_);
    return {2 * M * static_cast<double>(N_ * K_),
            static_cast<double>(in[0]->nbytes() + in[1]->nbytes() + in[2]->nbytes() + out[0].nbytes())};
  }
  void infer(InferContext& ctx) const override {
    ctx.check_dtype(0, {DType::Float32});
    ctx.check_dtype(1, {DType::UInt8});
    ctx.check_dtype(2, {DType::Float32});
    const SymShape& a = ctx.shape(0);
    if (a.empty() || (a.back().is_known() && a.back().value != K_)) ctx.fail("A ", sym_shape_str(a), " does not end in K = ", K_);
    SymShape y(a.begin(), a.end() - 1);
    y.push_back(Dim::known(N_));
    ctx.set(0, DType::Float32, y);
  }
  void run(RunContext& ctx) const override {
    const Tensor& A = ctx.in(0);
    const int64_t M = A.numel() / K_;
    if (M == 0) return;
    const Tensor absmax = aligned(ctx.in(2));  // (a misaligned view of the file read as floats: an aligned copy)
    kernels::matmul_bnb4(ctx.cpu, A.data<float>(), M, weights(ctx.in(1), absmax), ctx.out(0).data<float>());
  }

 private:
  // The codes and scales as the kernel reads them, their sizes checked against K and N.
  kernels::Bnb4Weights weights(const Tensor& B, const Tensor& absmax) const {
    const int64_t numel = N_ * K_, blocks = (numel + block_ - 1) / block_;
    if (B.numel() != (numel + 1) / 2) fail("B has ", B.numel(), " bytes; N · K = ", numel, " codes need ", (numel + 1) / 2);
    if (absmax.numel() != blocks) fail("absmax has ", absmax.numel(), " values; ", numel, " codes in blocks of ", block_, " need ", blocks);
    return {static_cast<const uint8_t*>(B.raw()),
            static_cast<const float*>(absmax.raw()),
            K_,
            N_,
            block_,
            type_ == 1 ? kernels::Bnb4Type::NF4 : kernels::Bnb4Type::FP4};
  }
  int64_t K_, N_, block_, type_;
};

}  // namespace

void register_matmul_bnb4(OpRegistry& r) { r.add("com.microsoft", "MatMulBnb4", factory<MatMulBnb4Op>()); }

}  // namespace tern
