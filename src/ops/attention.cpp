// Attention (opset 23/24). Q [B,Hq,Sq,D] or [B,Sq,Hq·D]; K/V likewise with Hkv heads; optional
// past_key/past_value are concatenated in front (present_* outputs). The mask (bool: true = attend,
// or additive float) may be shorter than the total length and is padded as masked; is_causal aligns
// bottom-right (query i sees keys j <= i + offset). Query head h reads KV head h / (Hq/Hkv).
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/copy.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// [B, H, S, D] float32 view of a 3-D [B, S, H·D] or 4-D input.
Tensor to_bhsd(const Tensor& t, int64_t heads) {
  Tensor f = cast_to(t, DType::Float32);
  if (t.rank() == 4) return f;
  const int64_t B = t.dim(0), S = t.dim(1), D = t.dim(2) / heads;
  Tensor out(DType::Float32, {B, heads, S, D});
  kernels::transpose(f.raw(), {B, S, heads, D}, {0, 2, 1, 3}, out.raw(), 4);
  return out;
}

// concat(past, cur) along the sequence axis (2) of [B, H, S, D] tensors.
Tensor concat_seq(const Tensor* past, const Tensor& cur) {
  if (!past) return cur;
  const int64_t B = cur.dim(0), H = cur.dim(1), Sp = past->dim(2), Sc = cur.dim(2), D = cur.dim(3);
  Tensor out(DType::Float32, {B, H, Sp + Sc, D});
  const size_t row = static_cast<size_t>(D) * 4;
  kernels::copy_rows(past->raw(), Sp * row, out.raw(), (Sp + Sc) * row, B * H, Sp * row);
  kernels::copy_rows(cur.raw(), Sc * row, static_cast<char*>(out.raw()) + Sp * row, (Sp + Sc) * row, B * H, Sc * row);
  return out;
}

class AttentionOp : public Op {
 public:
  explicit AttentionOp(const Node& n)
      : causal_(n.attr_int("is_causal", 0) != 0), q_heads_(n.attr_int("q_num_heads", 0)),
        kv_heads_(n.attr_int("kv_num_heads", 0)), mode_(n.attr_int("qk_matmul_output_mode", 0)),
        softcap_(n.attr_float("softcap", 0)), has_scale_(n.has_attr("scale")), scale_(n.attr_float("scale", 1)) {
    if (mode_ < 0 || mode_ > 3) fail(n.describe(), ": qk_matmul_output_mode must be 0..3");
  }

  void infer(InferContext& ctx) const override {
    const SymShape &q = ctx.shape(0), &k = ctx.shape(1), &v = ctx.shape(2);
    if (q.size() != k.size() || q.size() != v.size() || (q.size() != 3 && q.size() != 4))
      ctx.fail("Q, K and V must all be 3-D or all 4-D");
    Dim past = Dim::known(0);
    if (ctx.has(4)) past = ctx.shape(4).at(2);
    const bool four = q.size() == 4;
    if (!four && (q_heads_ <= 0 || kv_heads_ <= 0)) ctx.fail("3-D inputs need q_num_heads and kv_num_heads");
    const Dim B = q[0], Sq = four ? q[2] : q[1], Skv = four ? k[2] : k[1];
    const Dim Hq = four ? q[1] : Dim::known(q_heads_), Hkv = four ? k[1] : Dim::known(kv_heads_);
    auto div = [](const Dim& a, int64_t b) { return a.is_known() ? Dim::known(a.value / b) : Dim{}; };
    const Dim D = four ? k[3] : div(k[2], kv_heads_), Dv = four ? v[3] : div(v[2], kv_heads_);
    const Dim T = (past.is_known() && Skv.is_known()) ? Dim::known(past.value + Skv.value) : Dim{};
    const DType t = ctx.dtype(0);
    if (four) ctx.set(0, t, SymShape{B, Hq, Sq, Dv});
    else ctx.set(0, t, SymShape{B, Sq, v[2].is_known() ? Dim::known(q_heads_ * Dv.value) : Dim{}});
    ctx.set(1, t, SymShape{B, Hkv, T, D});
    ctx.set(2, t, SymShape{B, Hkv, T, Dv});
    ctx.set(3, t, SymShape{B, Hq, Sq, T});
  }

  void run(RunContext& ctx) const override {
    const Tensor& Qin = ctx.in(0);
    const bool four = Qin.rank() == 4;
    const int64_t hq = four ? Qin.dim(1) : q_heads_, hkv = four ? ctx.in(1).dim(1) : kv_heads_;
    Tensor Q = to_bhsd(Qin, hq), Kc = to_bhsd(ctx.in(1), hkv), Vc = to_bhsd(ctx.in(2), hkv);
    Tensor pk = ctx.has(4) ? cast_to(ctx.in(4), DType::Float32) : Tensor();
    Tensor pv = ctx.has(5) ? cast_to(ctx.in(5), DType::Float32) : Tensor();
    Tensor K = concat_seq(ctx.has(4) ? &pk : nullptr, Kc), V = concat_seq(ctx.has(5) ? &pv : nullptr, Vc);
    const int64_t B = Q.dim(0), Sq = Q.dim(2), D = Q.dim(3), T = K.dim(2), Dv = V.dim(3);
    if (hkv == 0 || hq % hkv != 0) fail(ctx.node.describe(), ": ", hq, " query heads are not a multiple of ", hkv, " KV heads");
    if (K.dim(3) != D) fail(ctx.node.describe(), ": Q head size ", D, " differs from K head size ", K.dim(3));

    Tensor bias = build_bias(ctx, B, hq, Sq, T);
    const float scale = has_scale_ ? scale_ : 1.0f / std::sqrt(static_cast<float>(D));
    const bool want_qk = ctx.outputs.size() > 3 && ctx.out(3).defined();
    Tensor Y(DType::Float32, {B, hq, Sq, Dv});
    Tensor qk = want_qk ? Tensor(DType::Float32, {B, hq, Sq, T}) : Tensor();
    std::vector<float> scores(static_cast<size_t>(Sq * T));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t g = h / (hq / hkv);
        kernels::AttentionArgs a;
        a.q_len = Sq; a.kv_len = T; a.head = D; a.v_head = Dv; a.scale = scale; a.softcap = softcap_;
        a.bias = bias.data<float>() + (b * hq + h) * Sq * T;
        a.scores = scores.data();
        if (want_qk) {
          a.record = qk.data<float>() + (b * hq + h) * Sq * T;
          a.record_stage = mode_ <= 1 ? 0 : mode_ - 1;
        }
        kernels::attention_head(Q.data<float>() + (b * hq + h) * Sq * D, K.data<float>() + (b * hkv + g) * T * D,
                                V.data<float>() + (b * hkv + g) * T * Dv, Y.data<float>() + (b * hq + h) * Sq * Dv, a);
      }
    if (four) {
      convert_tensor(Y, ctx.out(0));
    } else {
      Tensor y3(DType::Float32, {B, Sq, hq, Dv});
      kernels::transpose(Y.raw(), Y.shape(), {0, 2, 1, 3}, y3.raw(), 4);
      convert_tensor(y3, ctx.out(0));
    }
    if (ctx.outputs.size() > 1 && ctx.out(1).defined()) convert_tensor(K, ctx.out(1));
    if (ctx.outputs.size() > 2 && ctx.out(2).defined()) convert_tensor(V, ctx.out(2));
    if (want_qk) convert_tensor(qk, ctx.out(3));
  }

 private:
  // Additive bias [B, Hq, Sq, T]: the mask (padded to T, bool → 0/-inf), causal frontier and
  // nonpad_kv_seqlen padding.
  Tensor build_bias(const RunContext& ctx, int64_t B, int64_t H, int64_t Sq, int64_t T) const {
    Tensor bias(DType::Float32, {B, H, Sq, T});
    float* pb = bias.data<float>();
    std::fill(pb, pb + bias.numel(), 0.0f);
    if (ctx.has(3)) {
      const Tensor& m = ctx.in(3);
      if (m.rank() < 2 || m.rank() > 4) fail(ctx.node.describe(), ": attn_mask must be 2-D to 4-D");
      Tensor mf(DType::Float32, m.shape());
      if (m.dtype() == DType::Bool) {
        const bool* src = m.data<bool>();
        for (int64_t i = 0; i < m.numel(); ++i) mf.data<float>()[i] = src[i] ? 0.0f : kNegInf;
      } else {
        convert_tensor(m, mf);
      }
      const int64_t mt = m.dim(-1);
      if (mt > T) fail(ctx.node.describe(), ": attn_mask covers ", mt, " keys, only ", T, " exist");
      Shape padded = m.shape();
      padded.back() = T;
      std::vector<kernels::Dims> index(padded.size());
      for (size_t k = 0; k < padded.size(); ++k)
        for (int64_t i = 0; i < padded[k]; ++i) index[k].push_back(k + 1 == padded.size() && i >= mt ? -1 : i);
      Tensor mp(DType::Float32, padded);
      kernels::separable_gather(mf.raw(), mf.shape(), mp.raw(), padded, index, &kNegInf, 4);
      broadcast_shapes(ctx.node, sym_shape(padded), sym_shape(bias.shape()));
      kernels::broadcast_copy(mp.raw(), padded, pb, bias.shape(), 4);
    }
    std::vector<int64_t> nonpad;
    if (ctx.has(6)) {
      nonpad = ctx.in(6).to_i64_vector();
      if (static_cast<int64_t>(nonpad.size()) != B) fail(ctx.node.describe(), ": nonpad_kv_seqlen needs one entry per batch");
    }
    for (int64_t b = 0; b < B; ++b) {
      int64_t offset = 0;  // keys before this query block
      if (ctx.has(4)) offset = ctx.in(4).dim(2);
      else if (!nonpad.empty()) offset = nonpad[static_cast<size_t>(b)] - Sq;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < Sq; ++i) {
          float* row = pb + ((b * H + h) * Sq + i) * T;
          for (int64_t j = 0; j < T; ++j) {
            if (causal_ && j > i + offset) row[j] += kNegInf;
            if (!nonpad.empty() && j >= nonpad[static_cast<size_t>(b)]) row[j] += kNegInf;
          }
        }
    }
    return bias;
  }

  bool causal_;
  int64_t q_heads_, kv_heads_, mode_;
  float softcap_;
  bool has_scale_;
  float scale_;
};

}  // namespace

void register_attention(OpRegistry& r) { r.add("", "Attention", factory<AttentionOp>()); }

}  // namespace tern
