// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear: ONNX's linear quantization, what
// onnxruntime.quantization writes (transformers.js's model_quantized / model_int8 / model_uint8: a quantized
// embedding read through DequantizeLinear, activations quantized by DynamicQuantizeLinear for MatMulInteger).
// q = saturate(round(x / scale) + zero_point), rounding half to even; x = (q − zero_point) · scale. Scales and
// zero points apply per tensor (one value), per axis (one per index along `axis`) or in blocks (`block_size`
// indices along `axis` share one; the scale then has x's rank). Integer types: uint8, int8, uint16, int16,
// uint4, int4 (and int32 for DequantizeLinear); float8 and 2-bit types are refused naming the type.
#include <cmath>

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

// What both directions read the same way: axis, block_size and output_dtype; the scale as float32, the zero point's
// values widened to int32 (4-bit ones unpacked: core's convert_tensor), and where each element of x finds them.
class LinearQuantizationOp : public Op {
 public:
  explicit LinearQuantizationOp(const Node& n)
      : axis_(n.attr_int("axis", 1)),
        block_(n.attr_int("block_size", 0)),
        output_dtype_(static_cast<DType>(n.attr_int("output_dtype", 0))) {}

 protected:
  struct Params {
    Tensor scale, zero_point;  // float32; int32 (undefined when absent: 0)
    const float* scales = nullptr;
    const int32_t* zeros = nullptr;
    ParamLayout layout;
    int32_t zero_at(int64_t j) const { return zeros ? zeros[j] : 0; }
  };
  Params params(const RunContext& ctx, const Shape& x) const {
    Params p;
    p.scale = cast_to(ctx.in(1), DType::Float32);
    if (ctx.has(2)) p.zero_point = cast_to(ctx.in(2), DType::Int32);
    if (p.zero_point.defined() && p.zero_point.shape() != p.scale.shape() && !(p.zero_point.numel() == 1 && p.scale.numel() == 1))
      fail("the zero point has shape ", shape_str(p.zero_point.shape()), ", the scale ", shape_str(p.scale.shape()));
    p.scales = p.scale.data<float>();
    p.zeros = p.zero_point.defined() ? p.zero_point.data<int32_t>() : nullptr;
    p.layout = param_layout(ctx.node, x, p.scale.shape(), axis_, block_);
    return p;
  }
  int64_t axis_, block_;
  DType output_dtype_;
};

class QuantizeLinearOp : public LinearQuantizationOp {
 public:
  using LinearQuantizationOp::LinearQuantizationOp;
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
    const Tensor x = cast_to(ctx.in(0), DType::Float32);
    const Params p = params(ctx, x.shape());
    Tensor& y = ctx.out(0);
    const auto [lo, hi] = integer_range(ctx.node, y.dtype());
    const float* xs = x.data<float>();
    Tensor q(DType::Int32, y.shape());  // in range: convert_tensor then narrows (and packs 4-bit) exactly
    int32_t* qs = q.data<int32_t>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t j = p.layout.index(i);
      const double v = std::nearbyint(xs[i] / p.scales[j]) + p.zero_at(j);
      qs[i] = v >= lo ? static_cast<int32_t>(std::min<double>(v, hi)) : lo;  // (NaN: the lowest, as ORT)
    }
    convert_tensor(q, y);
  }
};

class DequantizeLinearOp : public LinearQuantizationOp {
 public:
  using LinearQuantizationOp::LinearQuantizationOp;
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
    const Tensor x = cast_to(ctx.in(0), DType::Int32);
    const Params p = params(ctx, x.shape());
    Tensor& y = ctx.out(0);
    Tensor values = y.dtype() == DType::Float32 ? y : Tensor(DType::Float32, y.shape());
    float* out = values.data<float>();
    const int32_t* xs = x.data<int32_t>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t j = p.layout.index(i);
      out[i] = static_cast<float>(static_cast<int64_t>(xs[i]) - p.zero_at(j)) * p.scales[j];
    }
    if (values.raw() != y.raw()) convert_tensor(values, y);
  }
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
    const kernels::U8Quantization p = kernels::dynamic_u8_quantization(ctx.cpu, x.data<float>(), x.numel());
    kernels::quantize_u8(ctx.cpu, x.data<float>(), x.numel(), p, ctx.out(0).data<uint8_t>());
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
