// MatMulBnb4 (com.microsoft): Y = A · dequant(B)ᵀ, B bitsandbytes' NF4 or FP4 codes of Wᵀ [N, K] in blocks sharing an
// absmax (kernels/cpu/bnb4.h) — transformers.js's model_bnb4.onnx. As ONNX Runtime does, the weight is dequantized to
// float32; a constant one once at load, into the panels MatMul's kernels read (so a token streams 4 bytes a weight,
// 8x the file's: a kernel reading the codes as MatMulNBits' do is left to do), else at each run.
#include "core/checked_math.h"
#include "kernels/cpu/bnb4.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_packed.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class MatMulBnb4Op : public Op {
 public:
  explicit MatMulBnb4Op(const Node& n)
      : K_(n.attr_int("K", 0)), N_(n.attr_int("N", 0)), block_(n.attr_int("block_size", 0)), type_(n.attr_int("quant_type", 1)) {
    if (K_ <= 0 || N_ <= 0) fail(n.describe(), ": attributes K and N are required");
    if (block_ < 16 || (block_ & (block_ - 1)) != 0) fail(n.describe(), ": block_size must be a power of 2 >= 16, got ", block_);
    if (type_ != 0 && type_ != 1) fail(n.describe(), ": quant_type ", type_, " is neither 0 (FP4) nor 1 (NF4)");
    if (n.attr_int("transB", 1) != 1) fail_unsupported(n.describe(), ": transB 0 (ONNX Runtime, too, reads B as Wᵀ)");
    const std::string what = n.describe() + ": its float32 weight, K · N";  // (sizes the load computes from them)
    checked_mul(checked_mul(K_, checked_add(N_, kernels::kPanel, what.c_str()), what.c_str()), int64_t{4}, what.c_str());
  }
  std::vector<int> prepack(const std::vector<const Tensor*>& constants, const PrepackOptions& options) override {
    const Tensor* B = constants.size() > 1 ? constants[1] : nullptr;
    const Tensor* absmax = constants.size() > 2 ? constants[2] : nullptr;
    if (!B || !absmax) return {};
    const int64_t elements = (N_ + kernels::kPanel - 1) / kernels::kPanel * kernels::kPanel * K_;
    const auto parts = options.prepared("panels float32", {{DType::Float32, elements}}, [&] {
      if (!B->raw() || !absmax->raw()) fail("its weight was left out of the pack, which holds no panels of it: run `tern pack` again");
      return std::vector<Tensor>{
          Tensor(DType::Float32, {elements}, kernels::pack_matrix(dequantized(*B, *absmax), DType::Float32, true).panels)};
    });
    packed_ = kernels::PackedMatrix{K_, N_, DType::Float32, parts[0].buffer()};
    return {1, 2};
  }
  int64_t packed_weight_bytes() const override { return packed_ ? packed_->bytes() : 0; }
  std::string kernel(const std::vector<const Tensor*>& in) const override {
    return packed_ ? kernels::matmul_packed_kernel(in[0]->numel() / K_, *packed_) : "gemm fp32";
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
    float* y = ctx.out(0).data<float>();
    if (packed_) {
      if (M > 0) kernels::matmul_packed(A.data<float>(), M, *packed_, y);
      return;
    }
    const Tensor W = dequantized(ctx.in(1), ctx.in(2));
    kernels::gemm<float>(false, true, M, N_, K_, 1.0f, A.data<float>(), K_, W.data<float>(), K_, 0.0f, y, N_);
  }

 private:
  // Wᵀ [N, K] as float32, its sizes checked against K and N.
  Tensor dequantized(const Tensor& B, const Tensor& absmax) const {
    const int64_t numel = N_ * K_, blocks = (numel + block_ - 1) / block_;
    if (B.numel() != (numel + 1) / 2) fail("B has ", B.numel(), " bytes; N · K = ", numel, " codes need ", (numel + 1) / 2);
    if (absmax.numel() != blocks) fail("absmax has ", absmax.numel(), " values; ", numel, " codes in blocks of ", block_, " need ", blocks);
    Tensor W(DType::Float32, {N_, K_});
    const Tensor scales = aligned(absmax);
    kernels::dequantize_bnb4(static_cast<const uint8_t*>(B.raw()), scales.data<float>(), numel, block_,
                             type_ == 1 ? kernels::Bnb4Type::NF4 : kernels::Bnb4Type::FP4, W.data<float>());
    return W;
  }
  int64_t K_, N_, block_, type_;
  std::optional<kernels::PackedMatrix> packed_;
};

}  // namespace

void register_matmul_bnb4(OpRegistry& r) { r.add("com.microsoft", "MatMulBnb4", factory<MatMulBnb4Op>()); }

}  // namespace tern
