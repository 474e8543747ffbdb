// MatMulInteger, and ONNX Runtime's com.microsoft MatMulIntegerToFloat and DynamicQuantizeMatMul: products of
// 8-bit operands with zero points, summed exactly in int32 (kernels/cpu/gemm_integer.h) — what
// onnxruntime.quantization's dynamic IntegerOps write for every MatMul of a float model (transformers.js's
// model_quantized.onnx: DynamicQuantizeLinear → MatMulInteger → Cast → Mul by the two scales).
//   MatMulInteger         Y (int32) = (A − a_zp) · (B − b_zp)
//   MatMulIntegerToFloat  Y = float((A − a_zp) · (B − b_zp)) · (a_scale · b_scale) + bias
//   DynamicQuantizeMatMul the same with A float, quantized first as DynamicQuantizeLinear does
// A [.., M, K] (uint8 or int8; its zero point one value or one per row), B [K, N] (uint8 or int8; its zero point
// and scale one value or one per column). B with batch dims is refused naming the node.
#include <cmath>
#include <optional>

#include "kernels/cpu/gemm_integer.h"
#include "ops/op.h"
#include "ops/register_all.h"
#include "ops/weight_packer.h"

namespace tern {
namespace {

// One value, or one per index of `per` (A's rows or B's columns): the count a zero point or scale may have. (Errors
// from run() and prepare() are prefixed with the node by the session.)
void check_count(const char* what, const Tensor& t, int64_t per, const char* per_what) {
  if (t.numel() != 1 && t.numel() != per) fail(what, " has ", t.numel(), " values; it takes 1 or one per ", per_what, " (", per, ")");
}

// A zero point's values widened (int8 or uint8, one or one per row or column).
std::vector<int32_t> zero_points(const Tensor& zp) {
  const Tensor wide = cast_to(zp, DType::Int32);
  return std::vector<int32_t>(wide.data<int32_t>(), wide.data<int32_t>() + wide.numel());
}

// A zero point, when given, has its operand's type.
void check_zero_point_type(InferContext& ctx, int zp, DType type) {
  if (ctx.has(zp) && ctx.dtype(zp) != type)
    ctx.fail("input ", zp, " (a zero point) is ", dtype_name(ctx.dtype(zp)), ", its operand ", dtype_name(type));
}

// The shape rule all three share: Y [.., M, N] from A [.., M, K] and B [K, N].
void infer_product(InferContext& ctx, DType a_type, DType out) {
  if (ctx.rank(1) != 2) fail_unsupported(ctx.node.describe(), ": B has rank ", ctx.rank(1), " (tern multiplies by a 2-D B)");
  ctx.check_dtype(1, {DType::UInt8, DType::Int8});
  const SymShape& a = ctx.shape(0);
  if (a.empty()) ctx.fail("A is a scalar");
  const Dim &k1 = a.back(), &k2 = ctx.dim(1, 0);
  if (k1.is_known() && k2.is_known() && k1.value != k2.value)
    ctx.fail("inner dimensions differ: ", sym_shape_str(a), " x ", sym_shape_str(ctx.shape(1)));
  SymShape y(a.begin(), a.end() - 1);
  y.push_back(ctx.dim(1, 1));
  if (a_type != DType::Undefined) ctx.check_dtype(0, {a_type});
  ctx.set(0, out, y);
}

// A's rows as the kernel takes them: uint8 codes with one zero point for every row or one per row (an int8 A, and
// its zero points, moved up by 128 into `storage`; a uint8 A read in place).
kernels::IntegerRows activation_rows(const Node& node, const Tensor& A, const Tensor* a_zp, int64_t K, std::vector<uint8_t>& storage) {
  if (A.dtype() != DType::UInt8 && A.dtype() != DType::Int8)
    fail(node.describe(), ": A is ", dtype_name(A.dtype()), "; it must be uint8 or int8");
  if (A.rank() == 0 || A.dim(-1) != K) fail(node.describe(), ": A ", shape_str(A.shape()), " has no last axis of ", K, " to multiply B by");
  kernels::IntegerRows a;
  a.M = K ? A.numel() / K : 0;
  if (a_zp) check_count("a_zero_point", *a_zp, a.M, "row of A");
  a.zero_points = a_zp ? zero_points(*a_zp) : std::vector<int32_t>{0};
  a.codes = static_cast<const uint8_t*>(A.raw());
  if (A.dtype() == DType::Int8) {
    storage.resize(static_cast<size_t>(A.numel()));
    for (size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<uint8_t>(a.codes[i] ^ 0x80);
    for (int32_t& z : a.zero_points) z += 128;
    a.codes = storage.data();
  }
  return a;
}

// What the three ops share: B packed with its zero points once at load when both are constants (else at each run),
// and the product.
class IntegerProductOp : public Op, public PacksWeights<std::optional<kernels::IntegerMatrix>>, public CostedOp {
 public:
  IntegerProductOp(const Node& n, int b_zero_point_input)
      : b_zp_(b_zero_point_input), b_zp_given_(static_cast<int>(n.inputs.size()) > b_zp_ && n.inputs[static_cast<size_t>(b_zp_)] >= 0) {}
  std::vector<int> prepare(const std::vector<const Tensor*>& constants, const PackTarget& options,
                           std::optional<kernels::IntegerMatrix>& into) const override {
    const auto at = [&](size_t i) { return i < constants.size() ? constants[i] : nullptr; };
    const Tensor *B = at(1), *zp = at(static_cast<size_t>(b_zp_));
    if (!B || B->rank() != 2 || (B->dtype() != DType::Int8 && B->dtype() != DType::UInt8) || (b_zp_given_ && !zp)) return {};
    if (zp) check_count("b_zero_point", *zp, B->dim(1), "column of B");
    const int64_t K = B->dim(0), N = B->dim(1);
    const bool is_signed = B->dtype() == DType::Int8;
    const auto parts = options.prepared("integer rows", {{B->dtype(), K * N}}, [&] {
      if (!B->raw()) fail("its weight was left out of the pack, which holds no integer rows of it: run `tern pack` again");
      return std::vector<Tensor>{kernels::pack_integer_matrix(B->raw(), is_signed, K, N, {}).rows};
    });
    into = kernels::integer_matrix(parts[0].reshaped({N, K}), is_signed, zp ? zero_points(*zp) : std::vector<int32_t>{});
    options.derives(N * static_cast<int64_t>(sizeof(int32_t)));  // its column sums
    return {1};
  }
  int64_t packed_bytes() const override { return prepared() ? prepared()->bytes() : 0; }
  std::string kernel(const std::vector<const Tensor*>&, kernels::Isa) const override { return "gemm_integer"; }
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState*) const override {
    const double weights = prepared() ? static_cast<double>(prepared()->bytes()) : static_cast<double>(in[1]->nbytes());
    return {2.0 * static_cast<double>(out[0].numel()) * static_cast<double>(in[1]->dim(0)),
            static_cast<double>(in[0]->nbytes() + out[0].nbytes()) + weights};
  }

 protected:
  int64_t inner(const Tensor& B) const { return prepared() ? prepared()->K : B.dim(0); }
  // (A − a_zp) · (B − b_zp) into c (int32 [rows, N]).
  void product(RunContext& ctx, const kernels::IntegerRows& a, int32_t* c) const {
    kernels::IntegerMatrix scratch;
    kernels::gemm_integer(ctx.cpu, a, weights(ctx, scratch), c);
  }
  // The same scaled into Y: float(c) · (a_scale · b_scale[n]) + bias[n], as ONNX Runtime scales its sums.
  void product(RunContext& ctx, const kernels::IntegerRows& a, float a_scale, const Tensor& b_scale, const Tensor* bias) const {
    kernels::IntegerMatrix scratch;
    const kernels::IntegerMatrix& w = weights(ctx, scratch);
    check_count("b_scale", b_scale, w.N, "column of B");
    if (bias && bias->numel() != w.N) fail(ctx.node.describe(), ": bias has ", bias->numel(), " values for ", w.N, " columns");
    // (The file's float32 ones read in place; a view of it may sit off its alignment.)
    const Tensor scales = cast_to(b_scale, DType::Float32), bias_f32 = bias ? cast_to(*bias, DType::Float32) : Tensor();
    const float* b = bias ? bias_f32.data<float>() : nullptr;
    Tensor& Y = ctx.out(0);
    Tensor values = Y.dtype() == DType::Float32 ? Y : Tensor(DType::Float32, Y.shape());
    kernels::gemm_integer_to_float(ctx.cpu, a, w, a_scale, scales.data<float>(), scales.numel(), b, values.data<float>());
    if (values.raw() != Y.raw()) convert_tensor(values, Y);
  }

 private:
  // The packed B, or B (input 1) and its zero points packed now into `scratch` when they are not constants.
  const kernels::IntegerMatrix& weights(RunContext& ctx, kernels::IntegerMatrix& scratch) const {
    if (prepared()) return *prepared();
    const Tensor& B = ctx.in(1);
    if (B.rank() != 2 || (B.dtype() != DType::Int8 && B.dtype() != DType::UInt8))
      fail(ctx.node.describe(), ": B is ", dtype_name(B.dtype()), " ", shape_str(B.shape()), "; it must be a 2-D uint8 or int8 matrix");
    const Tensor* zp = ctx.has(b_zp_) ? &ctx.in(b_zp_) : nullptr;
    if (zp) check_count("b_zero_point", *zp, B.dim(1), "column of B");
    scratch = kernels::pack_integer_matrix(aligned(B).raw(), B.dtype() == DType::Int8, B.dim(0), B.dim(1),
                                           zp ? zero_points(*zp) : std::vector<int32_t>{});
    return scratch;
  }

  int b_zp_;  // B's zero point's input index
  bool b_zp_given_;
};

float scalar_scale(const Node& node, const Tensor& s) {
  if (s.numel() != 1) fail(node.describe(), ": a_scale has ", s.numel(), " values; tern reads one (per tensor)");
  return static_cast<float>(s.at_f64(0));
}

class MatMulIntegerOp : public IntegerProductOp {
 public:
  explicit MatMulIntegerOp(const Node& n) : IntegerProductOp(n, 3) {}
  void infer(InferContext& ctx) const override {
    ctx.check_dtype(0, {DType::UInt8, DType::Int8});
    infer_product(ctx, DType::Undefined, DType::Int32);
    check_zero_point_type(ctx, 2, ctx.dtype(0));
    check_zero_point_type(ctx, 3, ctx.dtype(1));
  }
  void run(RunContext& ctx) const override {
    std::vector<uint8_t> storage;
    const kernels::IntegerRows a = activation_rows(ctx.node, ctx.in(0), ctx.has(2) ? &ctx.in(2) : nullptr, inner(ctx.in(1)), storage);
    product(ctx, a, ctx.out(0).data<int32_t>());
  }
};

class MatMulIntegerToFloatOp : public IntegerProductOp {
 public:
  explicit MatMulIntegerToFloatOp(const Node& n) : IntegerProductOp(n, 5) {}
  void infer(InferContext& ctx) const override {
    ctx.check_dtype(0, {DType::UInt8, DType::Int8});
    ctx.check_dtype(2, {DType::Float32, DType::Float16});
    infer_product(ctx, DType::Undefined, ctx.dtype(2));
    check_zero_point_type(ctx, 4, ctx.dtype(0));
    check_zero_point_type(ctx, 5, ctx.dtype(1));
  }
  void run(RunContext& ctx) const override {
    std::vector<uint8_t> storage;
    const kernels::IntegerRows a = activation_rows(ctx.node, ctx.in(0), ctx.has(4) ? &ctx.in(4) : nullptr, inner(ctx.in(1)), storage);
    product(ctx, a, scalar_scale(ctx.node, ctx.in(2)), ctx.in(3), ctx.has(6) ? &ctx.in(6) : nullptr);
  }
};

class DynamicQuantizeMatMulOp : public IntegerProductOp {
 public:
  explicit DynamicQuantizeMatMulOp(const Node& n) : IntegerProductOp(n, 3) {}
  void infer(InferContext& ctx) const override {
    infer_product(ctx, DType::Float32, DType::Float32);
    check_zero_point_type(ctx, 3, ctx.dtype(1));
  }
  void run(RunContext& ctx) const override {
    const Tensor& A = ctx.in(0);
    const int64_t K = inner(ctx.in(1));
    if (A.rank() == 0 || A.dim(-1) != K)
      fail(ctx.node.describe(), ": A ", shape_str(A.shape()), " has no last axis of ", K, " to multiply B by");
    const kernels::U8Quantization p = kernels::dynamic_u8_quantization(ctx.cpu, A.data<float>(), A.numel());
    uint8_t* codes = ctx.cpu.workspace().take<uint8_t>(kernels::Workspace::IntegerCodes, A.numel());  // (no allocation a step)
    kernels::quantize_u8(ctx.cpu, A.data<float>(), A.numel(), p, codes);
    product(ctx, kernels::IntegerRows{codes, K ? A.numel() / K : 0, {p.zero_point}}, p.scale, ctx.in(2), ctx.has(4) ? &ctx.in(4) : nullptr);
  }
};

}  // namespace

void register_matmul_integer(OpRegistry& r) {
  r.add("", "MatMulInteger", factory<MatMulIntegerOp>());
  r.add("com.microsoft", "MatMulIntegerToFloat", factory<MatMulIntegerToFloatOp>());
  r.add("com.microsoft", "DynamicQuantizeMatMul", factory<DynamicQuantizeMatMulOp>());
}

}  // namespace tern
