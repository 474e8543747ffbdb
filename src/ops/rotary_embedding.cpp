// RotaryEmbedding: ONNX (opset 23) and ONNX Runtime's (com.microsoft), one op with two input layouts.
//   ONNX:      (X, cos, sin, position_ids?) — cos/sin [max_pos, rot/2] indexed by position_ids [B, S],
//              or [B, S, rot/2] when position_ids is absent.
//   Microsoft: (X, position_ids, cos, sin) — position_ids [B, S], or [1] holding the first position;
//              num_heads may be 0 (head size then comes from the caches: 2·cos.dim(1)).
// X is [B, H, S, D] or [B, S, H·D].
#include "kernels/cpu/rope.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class RotaryEmbeddingOp : public Op {
 public:
  explicit RotaryEmbeddingOp(const Node& n)
      : microsoft_(n.domain == "com.microsoft"),
        interleaved_(n.attr_int("interleaved", 0) != 0),
        rot_dim_(n.attr_int("rotary_embedding_dim", 0)),
        num_heads_(n.attr_int("num_heads", 0)),
        cos_(microsoft_ ? 2 : 1),
        sin_(microsoft_ ? 3 : 2),
        pos_(microsoft_ ? 1 : 3) {}
  void infer(InferContext& ctx) const override {
    int64_t r = ctx.rank(0);
    if (r != 3 && r != 4) ctx.fail("input must be 3-D or 4-D, got ", sym_shape_str(ctx.shape(0)));
    if (r == 3 && num_heads_ <= 0 && !microsoft_) ctx.fail("3-D input needs the num_heads attribute");
    ctx.same_as_input(0, 0);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const bool four_d = x.rank() == 4;
    int64_t heads = num_heads_;
    if (!four_d && heads <= 0) {  // com.microsoft: head size from the caches (full rotation assumed)
      const int64_t head = 2 * ctx.in(cos_).dim(-1);
      if (head <= 0 || x.dim(2) % head != 0) fail(ctx.node.describe(), ": cannot infer num_heads from the caches");
      heads = x.dim(2) / head;
    }
    const int64_t B = x.dim(0), S = four_d ? x.dim(2) : x.dim(1), H = four_d ? x.dim(1) : heads;
    const int64_t D = four_d ? x.dim(3) : x.dim(2) / H;
    if (!four_d && x.dim(2) % H != 0) fail(ctx.node.describe(), ": hidden size ", x.dim(2), " is not a multiple of num_heads ", H);
    const int64_t rot = rot_dim_ ? rot_dim_ : D;
    if (rot > D || rot % 2) fail(ctx.node.describe(), ": rotary_embedding_dim ", rot, " does not fit head size ", D);
    Tensor xf = cast_to(x, DType::Float32), cosf = cast_to(ctx.in(cos_), DType::Float32), sinf = cast_to(ctx.in(sin_), DType::Float32);
    if (cosf.dim(-1) != rot / 2 || sinf.shape() != cosf.shape())
      fail(ctx.node.describe(), ": cos/sin caches ", shape_str(cosf.shape()), " do not match rotary dim ", rot);
    std::vector<int64_t> pos;
    if (ctx.has(pos_)) {
      pos = ctx.in(pos_).to_i64_vector();
      if (microsoft_ && pos.size() == 1) {  // a start offset: positions offset, offset+1, …
        const int64_t start = pos[0];
        pos.resize(static_cast<size_t>(B * S));
        for (int64_t e = 0; e < B * S; ++e) pos[static_cast<size_t>(e)] = start + e % S;
      }
      if (static_cast<int64_t>(pos.size()) != B * S) fail(ctx.node.describe(), ": position_ids must be [", B, ",", S, "]");
      for (int64_t p : pos)
        if (p < 0 || p >= cosf.dim(0))
          fail(ctx.node.describe(), ": position id ", p, " is outside the cos/sin cache of ", cosf.dim(0), " rows");
    } else if (cosf.numel() != B * S * (rot / 2)) {
      fail(ctx.node.describe(), ": without position_ids the caches must be [", B, ",", S, ",", rot / 2, "]");
    }
    Tensor yf = ctx.out(0).dtype() == DType::Float32 ? ctx.out(0) : Tensor(DType::Float32, x.shape());
    const float* px = xf.data<float>();
    float* py = yf.data<float>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t row = pos.empty() ? b * S + s : pos[static_cast<size_t>(b * S + s)];
        const float* c = cosf.data<float>() + row * (rot / 2);
        const float* sn = sinf.data<float>() + row * (rot / 2);
        for (int64_t h = 0; h < H; ++h) {
          const int64_t off = four_d ? ((b * H + h) * S + s) * D : ((b * S + s) * H + h) * D;
          kernels::rope_rotate(px + off, py + off, c, sn, rot, D, interleaved_);
        }
      }
    if (yf.raw() != ctx.out(0).raw()) convert_tensor(yf, ctx.out(0));
  }

 private:
  bool microsoft_, interleaved_;
  int64_t rot_dim_, num_heads_;
  int cos_, sin_, pos_;  // input indices of the caches and position ids in this layout
};

}  // namespace

void register_rotary_embedding(OpRegistry& r) {
  r.add("", "RotaryEmbedding", factory<RotaryEmbeddingOp>());
  r.add("com.microsoft", "RotaryEmbedding", factory<RotaryEmbeddingOp>());
}

}  // namespace tern
