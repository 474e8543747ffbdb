// ONNX Runtime's attention ops (com.microsoft), as its transformer optimizer and model builder emit them:
//   Attention: packed QKV projection of one input, past/present stacked [2, B, H, S, D], mask_index,
//              unidirectional (causal, offset by the past length);
//   MultiHeadAttention: projected Q/K/V (optional packed bias), past/present per tensor [B, H, S, D],
//              key_padding_mask and an additive attention_bias.
// A masked position scores mask_filter_value (set, not added), as ONNX Runtime does.
#include <cmath>
#include <cstring>
#include <tuple>

#include "core/checked_math.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "ops/attention_common.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

// Whether key j of batch b is a real token under a key mask: raw [B, T] (1 keeps) or [B, S, T], or
// per-batch lengths [B] (right padding: keys < length) — the forms ONNX Runtime accepts.
class KeyMask {
 public:
  explicit KeyMask(const Tensor* m)
      : rank_(m ? m->rank() : 0), rows_(m && m->rank() == 3 ? m->dim(1) : 0), v_(m ? m->to_i64_vector() : std::vector<int64_t>{}) {}
  bool keep(int64_t b, int64_t i, int64_t j, int64_t T) const {
    switch (rank_) {
      case 0: return true;
      case 1: return j < v_[static_cast<size_t>(b)];
      case 2: return v_[static_cast<size_t>(b * T + j)] != 0;
      default: return v_[static_cast<size_t>((b * rows_ + i) * T + j)] != 0;
    }
  }

 private:
  int64_t rank_, rows_;
  std::vector<int64_t> v_;  // read once: the mask's values as int64
};

// What ONNX Runtime's attention ops share: their attributes, and the step from [B, H, S, D] Q/K/V
// (past already prepended, P tokens of it) to the output [B, S, H·Dv]: key mask → mask_filter_value,
// optional causality offset by P, the additive attention_bias, then attention.
class OrtAttentionBase : public Op, public CostedOp {
 protected:
  explicit OrtAttentionBase(const Node& n)
      : heads_(n.attr_int("num_heads", 0)),
        causal_(n.attr_int("unidirectional", 0) != 0),
        filter_(n.attr_float("mask_filter_value", -10000.0f)),
        has_scale_(n.has_attr("scale")),
        scale_(n.attr_float("scale", 1)) {
    if (heads_ <= 0) fail(n.describe(), ": num_heads is required");
  }

 public:
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState*) const override {
    return attention_cost(in, out);
  }

 protected:
  Tensor attend(const RunContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v, int64_t P, int mask_input, int bias_input) const {
    const int64_t B = q.dim(0), S = q.dim(2), T = k.dim(2);
    KeyMask km(ctx.has(mask_input) ? &ctx.in(mask_input) : nullptr);
    Tensor bias = allowed_bias(B, heads_, S, T, filter_,
                               [&](int64_t b, int64_t i, int64_t j) { return km.keep(b, i, j, T) && (!causal_ || j <= P + i); });
    if (ctx.has(bias_input)) add_attention_bias(bias, ctx.in(bias_input), ctx.node);
    AttentionCall call;
    call.scale = has_scale_ ? scale_ : 1.0f / std::sqrt(static_cast<float>(q.dim(3)));
    call.bias = &bias;
    return from_bhsd(attention(q, k, v, call));
  }
  int64_t heads_;
  bool causal_;
  float filter_;
  bool has_scale_;
  float scale_;
};

class ContribAttentionOp : public OrtAttentionBase {
 public:
  enum Input : int { kInput, kWeights, kBias, kMaskIndex, kPast, kAttentionBias };  // (the spec's order)
  explicit ContribAttentionOp(const Node& n) : OrtAttentionBase(n), qkv_sizes_(n.attr_ints("qkv_hidden_sizes")) {
    if (n.attr_int("do_rotary", 0) || n.attr_int("past_present_share_buffer", 0))
      fail_unsupported(n.describe(), ": do_rotary and past_present_share_buffer are not supported");
  }
  void infer(InferContext& ctx) const override {
    const SymShape& x = ctx.shape(kInput);
    const SymShape& w = ctx.shape(kWeights);
    if (x.size() != 3 || w.size() != 2) ctx.fail("input must be [B, S, H] and weights [H, 3·hidden]");
    auto [qh, kh, vh] = sizes(w[1]);
    (void)qh;
    ctx.set(0, ctx.dtype(kInput), SymShape{x[0], x[1], Dim::known(vh)});
    Dim total{};
    if (ctx.has(kPast)) {
      const Dim& p = ctx.dim(kPast, 3);
      if (p.is_known() && x[1].is_known()) total = Dim::known(checked_add(p.value, x[1].value, "past + new sequence length"));
    } else {
      total = x[1];
    }
    ctx.set(1, ctx.dtype(kInput), SymShape{Dim::known(2), x[0], Dim::known(heads_), total, Dim::known(kh / heads_)});
  }
  void run(RunContext& ctx) const override {
    const Tensor x = cast_to(ctx.in(kInput), DType::Float32), w = cast_to(ctx.in(kWeights), DType::Float32);
    const int64_t B = x.dim(0), S = x.dim(1), Hin = x.dim(2), N = w.dim(1);
    auto [qh, kh, vh] = sizes(Dim::known(N));
    Tensor qkv(DType::Float32, {B, S, N});
    kernels::gemm<float>(ctx.cpu, false, false, B * S, N, Hin, 1.0f, x.data<float>(), Hin, w.data<float>(), N, 0.0f, qkv.data<float>(), N);
    if (ctx.has(kBias)) {
      Tensor bias = cast_to(ctx.in(kBias), DType::Float32);
      kernels::binary_broadcast(qkv.data<float>(), qkv.shape(), bias.data<float>(), {N}, qkv.data<float>(), qkv.shape(),
                                [](float a, float b) { return a + b; });
    }
    auto part = [&](int64_t from, int64_t width) {  // [B, S, width] slice of the packed projection
      Tensor t(DType::Float32, {B, S, width});
      for (int64_t r = 0; r < B * S; ++r) std::copy_n(qkv.data<float>() + r * N + from, width, t.data<float>() + r * width);
      return to_bhsd(t, heads_);
    };
    Tensor q = part(0, qh), k = part(qh, kh), v = part(qh + kh, vh);
    int64_t P = 0;
    if (ctx.has(kPast)) {  // past [2, B, H, P, D]
      Tensor past = cast_to(ctx.in(kPast), DType::Float32);
      P = past.dim(3);
      const Shape one{B, past.dim(2), P, past.dim(4)};
      Tensor pk = Tensor(DType::Float32, one, past.buffer(), 0), pv = Tensor(DType::Float32, one, past.buffer(), past.nbytes() / 2);
      k = concat_seq(&pk, k);
      v = concat_seq(&pv, v);
    }
    convert_tensor(attend(ctx, q, k, v, P, /*mask_index*/ 3, /*attention_bias*/ 5), ctx.out(0));
    if (ctx.outputs.size() > 1 && ctx.out(1).defined()) {  // present [2, B, H, T, D]
      Tensor& present = ctx.out(1);
      Tensor kv(DType::Float32, present.shape());
      std::memcpy(kv.raw(), k.raw(), k.nbytes());
      std::memcpy(static_cast<char*>(kv.raw()) + k.nbytes(), v.raw(), v.nbytes());
      convert_tensor(kv, present);
    }
  }

 private:
  std::tuple<int64_t, int64_t, int64_t> sizes(const Dim& packed) const {
    if (qkv_sizes_.size() == 3) return {qkv_sizes_[0], qkv_sizes_[1], qkv_sizes_[2]};
    if (!packed.is_known()) throw ShapeUnknown{};
    const int64_t h = packed.value / 3;
    return {h, h, h};
  }
  std::vector<int64_t> qkv_sizes_;
};

class MultiHeadAttentionOp : public OrtAttentionBase {
 public:
  enum Input : int { kQuery, kKey, kValue, kBias, kKeyPaddingMask, kAttentionBias, kPastKey, kPastValue };  // (the spec's order)
  explicit MultiHeadAttentionOp(const Node& n) : OrtAttentionBase(n) {}
  void infer(InferContext& ctx) const override {
    const SymShape& q = ctx.shape(kQuery);
    if (q.size() != 3) fail_unsupported(ctx.node.describe(), ": only 3-D query [B, S, hidden] is supported");
    if (!ctx.has(kKey) || !ctx.has(kValue)) fail_unsupported(ctx.node.describe(), ": packed QKV (no key/value inputs) is not supported");
    const SymShape& k = ctx.shape(kKey);
    const SymShape& v = ctx.shape(kValue);
    const bool k4 = k.size() == 4;
    const Dim vh =
        v.size() == 4 ? (v[3].is_known() ? Dim::known(checked_mul(v[3].value, heads_, "value head size x heads")) : Dim{}) : v[2];
    ctx.set(0, ctx.dtype(kQuery), SymShape{q[0], q[1], vh});
    Dim total{};
    const Dim skv = k4 ? k[2] : k[1];
    if (ctx.has(kPastKey)) {
      const Dim& p = ctx.dim(kPastKey, 2);
      if (p.is_known() && skv.is_known()) total = Dim::known(checked_add(p.value, skv.value, "past + new sequence length"));
    } else {
      total = skv;
    }
    auto head = [&](const Dim& hidden) { return hidden.is_known() ? Dim::known(hidden.value / heads_) : Dim{}; };
    ctx.set(1, ctx.dtype(kQuery), SymShape{q[0], Dim::known(heads_), total, k4 ? k[3] : head(k[2])});
    ctx.set(2, ctx.dtype(kQuery), SymShape{q[0], Dim::known(heads_), total, v.size() == 4 ? v[3] : head(v[2])});
  }
  void run(RunContext& ctx) const override {
    Tensor qf = cast_to(ctx.in(kQuery), DType::Float32), kf = cast_to(ctx.in(kKey), DType::Float32),
           vf = cast_to(ctx.in(kValue), DType::Float32);
    if (ctx.has(kBias)) {  // packed bias [q_hidden + k_hidden + v_hidden] added to 3-D Q, K, V
      Tensor bias = cast_to(ctx.in(kBias), DType::Float32);
      int64_t at = 0;
      for (Tensor* t : {&qf, &kf, &vf}) {
        if (t->rank() != 3) fail_unsupported(ctx.node.describe(), ": bias with 4-D key/value is not supported");
        *t = t->clone();
        const int64_t w = t->dim(2);
        kernels::binary_broadcast(t->data<float>(), t->shape(), bias.data<float>() + at, {w}, t->data<float>(), t->shape(),
                                  [](float a, float b) { return a + b; });
        at += w;
      }
    }
    Tensor q = to_bhsd(qf, heads_), k = to_bhsd(kf, heads_), v = to_bhsd(vf, heads_);
    int64_t P = 0;
    if (ctx.has(kPastKey) && ctx.has(kPastValue)) {
      Tensor pk = cast_to(ctx.in(kPastKey), DType::Float32), pv = cast_to(ctx.in(kPastValue), DType::Float32);
      P = pk.dim(2);
      k = concat_seq(&pk, k);
      v = concat_seq(&pv, v);
    }
    convert_tensor(attend(ctx, q, k, v, P, /*key_padding_mask*/ 4, /*attention_bias*/ 5), ctx.out(0));
    if (ctx.outputs.size() > 1 && ctx.out(1).defined()) convert_tensor(k, ctx.out(1));
    if (ctx.outputs.size() > 2 && ctx.out(2).defined()) convert_tensor(v, ctx.out(2));
  }
};

}  // namespace

void register_contrib_attention(OpRegistry& r) {
  r.add("com.microsoft", "Attention", factory<ContribAttentionOp>());
  r.add("com.microsoft", "MultiHeadAttention", factory<MultiHeadAttentionOp>());
}

}  // namespace tern
