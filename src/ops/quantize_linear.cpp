// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear: ONNX's linear quantization, what
// onnxruntime.quantization writes (transformers.js's model_quantized / model_int8 / model_uint8: a quantized
// embedding read through DequantizeLinear, activations quantized by DynamicQuantizeLinear for MatMulInteger).
// q = saturate(round(x / scale) + zero_point), rounding half to even; x = (q − zero_point) · scale. Scales and
// zero points apply per tensor (one value), per axis (one per index along `axis`) or in blocks (`block_size`
// indices along `axis` share one; the scale then has x's rank). Integer types: uint8, int8, uint16, int16,
// uint4, int4 (and int32 for DequantizeLinear); float8 and 2-bit types are refused naming the type.
#include <cmath>
#include <cstring>

#include "core/checked_math.h"
#include "kernels/cpu/gemm_integer.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

// The integer range of a quantized type; fails (unsupported) for types tern does not quantize to.
std::pair<int32_t, int32_t> integer_range(const Node& node, DType t) {
  switch (t) {
    case DType::UInt8: return {0, 255};
    case DType::Int8: return {-128, 127};
    case DType::UInt16: return {0, 65535};
    case DType::Int16: return {-32768, 32767};
    case DType::UInt4: return {0, 15};
    case DType::Int4: return {-8, 7};
    case DType::Int32: return {INT32_MIN, INT32_MAX};
    default:
      fail_unsupported(node.describe(), ": quantized type ", dtype_name(t), " is not supported (tern reads 4-, 8- and 16-bit integers)");
  }
}

// Element i of an integer tensor of any quantized type, widened (4-bit pairs low nibble first).
int32_t integer_at(const Tensor& t, int64_t i) {
  const void* p = t.raw();
  switch (t.dtype()) {
    case DType::UInt8: return static_cast<const uint8_t*>(p)[i];
    case DType::Int8: return static_cast<const int8_t*>(p)[i];
    case DType::UInt16: return static_cast<const uint16_t*>(p)[i];
    case DType::Int16: return static_cast<const int16_t*>(p)[i];
    case DType::Int32: return static_cast<const int32_t*>(p)[i];
    case DType::UInt4:
    case DType::Int4: {
      const int v = (static_cast<const uint8_t*>(p)[i / 2] >> (4 * (i % 2))) & 15;
      return t.dtype() == DType::Int4 && v > 7 ? v - 16 : v;
    }
    default: fail("integer_at: ", dtype_name(t.dtype()));
  }
}

// Writes the in-range integers q into t (4-bit types packed two a byte, low nibble first).
void store_integers(const std::vector<int32_t>& q, Tensor& t) {
  void* p = t.raw();
  const int64_t n = static_cast<int64_t>(q.size());
  switch (t.dtype()) {
    case DType::UInt8:
    case DType::Int8:
      for (int64_t i = 0; i < n; ++i) static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(q[static_cast<size_t>(i)]);
      break;
    case DType::UInt16:
    case DType::Int16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(q[static_cast<size_t>(i)]);
      break;
    case DType::UInt4:
    case DType::Int4:
      std::memset(p, 0, t.nbytes());
      for (int64_t i = 0; i < n; ++i)
        static_cast<uint8_t*>(p)[i / 2] |= static_cast<uint8_t>((q[static_cast<size_t>(i)] & 15) << (4 * (i % 2)));
      break;
    default: fail("store_integers: ", dtype_name(t.dtype()));
  }
}

// Where element i of x finds its scale and zero point: one for all (per tensor), one per index along the axis
// (per axis), or one per `block` indices along it (blocked: the scale has x's shape with that axis divided).
struct ParamLayout {
  bool per_tensor = true;
  int64_t axis_len = 1, inner = 1, block = 0, blocks = 1;
  int64_t index(int64_t i) const {
    if (per_tensor) return 0;
    const int64_t a = (i / inner) % axis_len;
    if (block == 0) return a;
    return ((i / (inner * axis_len)) * blocks + a / block) * inner + i % inner;
  }
};

ParamLayout param_layout(const Node& node, const Shape& x, const Shape& scale, int64_t axis_attr, int64_t block) {
  ParamLayout p;
  if (numel_of(scale) == 1 && block == 0 && scale.size() <= 1) return p;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = normalize_axis(node, axis_attr, rank);
  p.per_tensor = false;
  p.axis_len = x[static_cast<size_t>(axis)];
  for (int64_t d = axis + 1; d < rank; ++d) p.inner = checked_mul(p.inner, x[static_cast<size_t>(d)], "the input's size");
  if (block == 0) {
    if (scale.size() != 1 || scale[0] != p.axis_len)
      fail(node.describe(), ": the scale has shape ", shape_str(scale), "; per axis ", axis, " it needs [", p.axis_len, "]");
    return p;
  }
  if (block < 0) fail(node.describe(), ": block_size ", block, " is negative");
  p.block = block;
  p.blocks = (p.axis_len + block - 1) / block;
  Shape want = x;
  want[static_cast<size_t>(axis)] = p.blocks;
  if (scale != want)
    fail(node.describe(), ": the scale has shape ", shape_str(scale), "; blocks of ", block, " along axis ", axis, " of ", shape_str(x),
         " need ", shape_str(want));
  return p;
}

// The zero point's elements, checked to match the scale's shape (or 0 everywhere when absent).
void check_zero_point(const Node& node, const Tensor* zp, const Tensor& scale) {
  if (zp && zp->shape() != scale.shape() && !(zp->numel() == 1 && scale.numel() == 1))
    fail(node.describe(), ": the zero point has shape ", shape_str(zp->shape()), ", the scale ", shape_str(scale.shape()));
}

class QuantizeLinearOp : public Op {
 public:
  explicit QuantizeLinearOp(const Node& n)
      : axis_(n.attr_int("axis", 1)),
        block_(n.attr_int("block_size", 0)),
        output_dtype_(static_cast<DType>(n.attr_int("output_dtype", 0))) {}
  void infer(InferContext& ctx) const override {
    ctx.check_dtype(0, {DType::Float32, DType::Float16, DType::BFloat16, DType::Int32});
    ctx.check_dtype(1, {DType::Float32, DType::Float16, DType::BFloat16, DType::Int32});
    DType out = output_dtype_ != DType::Undefined ? output_dtype_ : ctx.has(2) ? ctx.dtype(2) : DType::UInt8;
    if (ctx.has(2) && ctx.dtype(2) != out) ctx.fail("output_dtype is ", dtype_name(out), ", the zero point ", dtype_name(ctx.dtype(2)));
    if (out == DType::Int32) ctx.fail("quantizes to int32, which QuantizeLinear does not define");
    integer_range(ctx.node, out);
    ctx.set(0, out, ctx.shape(0));
  }
  void run(RunContext& ctx) const override {
    const Tensor x = cast_to(ctx.in(0), DType::Float32), scale = cast_to(ctx.in(1), DType::Float32);
    const Tensor zp_aligned = ctx.has(2) ? aligned(ctx.in(2)) : Tensor();  // (a view of the file may sit off its alignment)
    const Tensor* zp = ctx.has(2) ? &zp_aligned : nullptr;
    check_zero_point(ctx.node, zp, scale);
    const ParamLayout p = param_layout(ctx.node, x.shape(), scale.shape(), axis_, block_);
    Tensor& y = ctx.out(0);
    const auto [lo, hi] = integer_range(ctx.node, y.dtype());
    const float* xs = x.data<float>();
    const float* ss = scale.data<float>();
    std::vector<int32_t> q(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t j = p.index(i);
      const double v = std::nearbyint(xs[i] / ss[j]) + (zp ? integer_at(*zp, j) : 0);
      q[static_cast<size_t>(i)] = v >= lo ? static_cast<int32_t>(std::min<double>(v, hi)) : lo;  // (NaN: the lowest, as ORT)
    }
    store_integers(q, y);
  }

 private:
  int64_t axis_, block_;
  DType output_dtype_;
};

class DequantizeLinearOp : public Op {
 public:
  explicit DequantizeLinearOp(const Node& n)
      : axis_(n.attr_int("axis", 1)),
        block_(n.attr_int("block_size", 0)),
        output_dtype_(static_cast<DType>(n.attr_int("output_dtype", 0))) {}
  void infer(InferContext& ctx) const override {
    integer_range(ctx.node, ctx.dtype(0));
    ctx.check_dtype(1, {DType::Float32, DType::Float16, DType::BFloat16});
    if (ctx.has(2) && ctx.dtype(2) != ctx.dtype(0))
      ctx.fail("the zero point is ", dtype_name(ctx.dtype(2)), ", x ", dtype_name(ctx.dtype(0)));
    const DType out = output_dtype_ != DType::Undefined ? output_dtype_ : ctx.dtype(1);
    if (out != DType::Float32 && out != DType::Float16 && out != DType::BFloat16)
      ctx.fail("output_dtype ", dtype_name(out), " is not a float type");
    ctx.set(0, out, ctx.shape(0));
  }
  void run(RunContext& ctx) const override {
    const Tensor &x = ctx.in(0), scale = cast_to(ctx.in(1), DType::Float32);
    const Tensor zp_aligned = ctx.has(2) ? aligned(ctx.in(2)) : Tensor();  // (a view of the file may sit off its alignment)
    const Tensor* zp = ctx.has(2) ? &zp_aligned : nullptr;
    check_zero_point(ctx.node, zp, scale);
    const ParamLayout p = param_layout(ctx.node, x.shape(), scale.shape(), axis_, block_);
    Tensor& y = ctx.out(0);
    Tensor values = y.dtype() == DType::Float32 ? y : Tensor(DType::Float32, y.shape());
    float* out = values.data<float>();
    const float* ss = scale.data<float>();
    const Tensor xa = aligned(x);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t j = p.index(i);
      out[i] = static_cast<float>(static_cast<int64_t>(integer_at(xa, i)) - (zp ? integer_at(*zp, j) : 0)) * ss[j];
    }
    if (values.raw() != y.raw()) convert_tensor(values, y);
  }

 private:
  int64_t axis_, block_;
  DType output_dtype_;
};

// y = QuantizeLinear(x) with the uint8 scale and zero point that map x's range (stretched to include 0) onto
// [0, 255] (kernels::dynamic_u8_quantization).
class DynamicQuantizeLinearOp : public Op {
 public:
  explicit DynamicQuantizeLinearOp(const Node&) {}
  void infer(InferContext& ctx) const override {
    ctx.check_dtype(0, {DType::Float32});
    ctx.set(0, DType::UInt8, ctx.shape(0));
    ctx.set(1, DType::Float32, Shape{});
    ctx.set(2, DType::UInt8, Shape{});
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const kernels::U8Quantization p = kernels::dynamic_u8_quantization(x.data<float>(), x.numel());
    kernels::quantize_u8(x.data<float>(), x.numel(), p, ctx.out(0).data<uint8_t>());
    ctx.out(1).data<float>()[0] = p.scale;
    ctx.out(2).data<uint8_t>()[0] = p.zero_point;
  }
};

}  // namespace

void register_quantize_linear(OpRegistry& r) {
  r.add("", "QuantizeLinear", factory<QuantizeLinearOp>());
  r.add("", "DequantizeLinear", factory<DequantizeLinearOp>());
  r.add("", "DynamicQuantizeLinear", factory<DynamicQuantizeLinearOp>());
}

}  // namespace tern
