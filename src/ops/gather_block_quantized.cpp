// com.microsoft GatherBlockQuantized: Gather over a block-quantized table, dequantizing the rows it picks —
// what the onnxruntime-genai builder writes for an int4 embedding shared with the LM head (shared_embeddings),
// and ONNX Runtime's MatMulNBitsQuantizer for an embedding's Gather. data: uint8, `bits` (4 or 8) per value
// along the last axis, 4-bit pairs low nibble first within each row (MatMulNBits' packing), zero points packed
// the same way, default 2^(bits−1); or uint4/int4 (the quantizer's), the ONNX types' packing — two values a byte
// over the whole tensor, low nibble first — with zero points of the same type, default 0. scales: one per
// `block_size` values of the last axis, and their type is the output's. value = (q − zero point) · scale.
// tern's extension, outside ONNX Runtime's schema: float32 zero points, one per block as the scales (what
// MatMulNBits takes: a GGUF Q4_K/Q5_K/Q4_1 table is exact only so; tern import-gguf writes them, and ONNX
// Runtime refuses that folder). tern reads gather_axis 0 and quantize_axis = the last axis (what both write); other layouts are refused
// naming the attribute.
#include <algorithm>
#include <cstring>

#include "core/checked_math.h"
#include "core/dtype.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class GatherBlockQuantizedOp : public Op, public CostedOp {
 public:
  explicit GatherBlockQuantizedOp(const Node& n)
      : gather_axis_(n.attr_int("gather_axis", 0)),
        quantize_axis_(n.attr_int("quantize_axis", 1)),
        block_(n.attr_int("block_size", 128)),
        bits_(n.attr_int("bits", 4)) {
    if (bits_ != 4 && bits_ != 8) fail_unsupported(n.describe(), ": bits ", bits_, " (tern reads 4 and 8)");
    if (block_ < 16 || (block_ & (block_ - 1))) fail(n.describe(), ": block_size ", block_, " is not a power of 2 of at least 16");
    if (gather_axis_ != 0) fail_unsupported(n.describe(), ": gather_axis ", gather_axis_, " (tern reads 0)");
  }
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>&, const OpState*) const override {
    return {0, static_cast<double>(in[1]->nbytes())};  // a few rows of the table (as Gather)
  }
  void infer(InferContext& ctx) const override {
    ctx.check_dtype(0, {DType::UInt8, DType::UInt4, DType::Int4});
    if (ctx.has(3) && ctx.dtype(3) != ctx.dtype(0) && !(ctx.dtype(3) == DType::Float32 && ctx.dtype(0) == DType::UInt8))
      ctx.fail("zero_points are ", dtype_name(ctx.dtype(3)), ", data ", dtype_name(ctx.dtype(0)));
    ctx.check_dtype(2, {DType::Float32, DType::Float16, DType::BFloat16});
    const SymShape& data = ctx.shape(0);
    const int64_t rank = static_cast<int64_t>(data.size());
    if (rank < 2) ctx.fail("data has rank ", rank, "; a table has at least 2");
    if (normalize_axis(ctx.node, quantize_axis_, rank) != rank - 1)
      ctx.fail("quantize_axis ", quantize_axis_, " is not the last axis (tern reads uint8 data quantized along it)");
    SymShape out = ctx.shape(1);
    out.insert(out.end(), data.begin() + 1, data.end());
    Dim& last = out.back();
    if (ctx.dtype(0) == DType::UInt8 && last.is_known())
      last = Dim::known(checked_mul(last.value, 8 / bits_, "the table's values per row"));
    else if (ctx.dtype(0) == DType::UInt8) last = Dim{};
    ctx.set(0, ctx.dtype(2), out);
  }
  void run(RunContext& ctx) const override {
    const Tensor& data = ctx.in(0);
    const Tensor& ids = ctx.in(1);
    const Tensor& scales = ctx.in(2);
    const Tensor* zps = ctx.has(3) ? &ctx.in(3) : nullptr;
    Tensor& y = ctx.out(0);
    // uint8 packs each row (`bytes` a row); uint4/int4 pack the whole tensor (a row starts mid-byte when odd).
    const bool per_row = data.dtype() == DType::UInt8, is_signed = data.dtype() == DType::Int4;
    const int bits = per_row ? static_cast<int>(bits_) : 4;
    const int64_t rows = data.dim(0), last = data.dim(data.rank() - 1), L = per_row ? last * (8 / bits) : last;
    const int64_t lines = data.numel() / std::max<int64_t>(rows * last, 1);  // last-axis lines per row
    const bool zp_float = zps && zps->dtype() == DType::Float32;
    const int64_t blocks = (L + block_ - 1) / block_, zp_row = per_row && bits == 4 && !zp_float ? (blocks + 1) / 2 : blocks;
    if (scales.numel() != rows * lines * blocks)
      fail(ctx.node.describe(), ": scales has ", scales.numel(), " values; the data's blocks of ", block_, " need ", rows * lines * blocks);
    if (zps && zps->numel() != rows * lines * zp_row)
      fail(ctx.node.describe(), ": zero_points has ", zps->numel(), " values; the data's blocks need ", rows * lines * zp_row);
    // Dequantized in float32 (into the output itself when it is float32): one loop for every scale type.
    const bool f32 = y.dtype() == DType::Float32;
    Tensor values = f32 ? y : Tensor(DType::Float32, y.shape());
    float* out = values.data<float>();
    const auto* q = static_cast<const uint8_t*>(data.raw());
    const auto* zp = zps && !zp_float ? static_cast<const uint8_t*>(zps->raw()) : nullptr;
    const float* zp_f = zp_float ? zps->data<float>() : nullptr;
    // The i-th value from p: a byte, or a nibble (low first), sign-extended for int4.
    auto value = [&](const uint8_t* p, int64_t i) -> int {
      if (bits == 8) return p[i];
      const int v = (p[i / 2] >> (4 * (i % 2))) & 15;
      return is_signed && v > 7 ? v - 16 : v;
    };
    const int zero = per_row ? 1 << (bits - 1) : 0;
    for (int64_t n = 0; n < ids.numel(); ++n) {  // (read in place: an embedding lookup a token allocates nothing)
      int64_t r = ids.at_i64(n);
      if (r < -rows || r >= rows) fail(ctx.node.describe(), ": index ", r, " is out of range for ", rows, " rows");
      if (r < 0) r += rows;
      for (int64_t l = 0; l < lines; ++l) {
        const int64_t line = r * lines + l;
        // Where the line's values and zero points start: a row of bytes (uint8), else flat indices.
        const uint8_t* row = per_row ? q + line * last : q;
        const int64_t first = per_row ? 0 : line * L;
        const uint8_t* zp_line = zp && per_row ? zp + line * zp_row : zp;
        const int64_t zp_first = per_row ? 0 : line * blocks;
        float* dst = out + (n * lines + l) * L;
        for (int64_t b = 0; b < blocks; ++b) {
          const float scale = static_cast<float>(scales.at_f64(line * blocks + b));
          if (zp_f) {  // (q − zp) · scale as MatMulNBits computes it
            const float z = zp_f[line * blocks + b];
            for (int64_t c = b * block_; c < std::min(L, (b + 1) * block_); ++c)
              dst[c] = (static_cast<float>(value(row, first + c)) - z) * scale;
            continue;
          }
          const int z = zp ? value(zp_line, zp_first + b) : zero;
          for (int64_t c = b * block_; c < std::min(L, (b + 1) * block_); ++c)
            dst[c] = static_cast<float>(value(row, first + c) - z) * scale;
        }
      }
    }
    if (!f32) {
      const Tensor converted = cast_to(values, y.dtype());
      std::memcpy(y.raw(), converted.raw(), y.nbytes());
    }
  }

 private:
  int64_t gather_axis_, quantize_axis_, block_, bits_;
};

}  // namespace

void register_gather_block_quantized(OpRegistry& r) { r.add("com.microsoft", "GatherBlockQuantized", factory<GatherBlockQuantizedOp>()); }

}  // namespace tern
