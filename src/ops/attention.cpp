// Attention (opset 23/24). Q [B,Hq,Sq,D] or [B,Sq,Hq·D]; K/V likewise with Hkv heads; optional
// past_key/past_value are concatenated in front (present_* outputs). The mask (bool: true = attend,
// or additive float) may be shorter than the total length and is padded as masked; is_causal aligns
// bottom-right (query i sees keys j <= i + offset). Query head h reads KV head h / (Hq/Hkv).
#include <cmath>
#include <cstring>
#include <limits>

#include "core/checked_math.h"
#include "kernels/cpu/copy.h"
#include "ops/attention_common.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class AttentionOp : public Op, public CostedOp {
 public:
  explicit AttentionOp(const Node& n)
      : causal_(n.attr_int("is_causal", 0) != 0),
        q_heads_(n.attr_int("q_num_heads", 0)),
        kv_heads_(n.attr_int("kv_num_heads", 0)),
        mode_(n.attr_int("qk_matmul_output_mode", 0)),
        softcap_(n.attr_float("softcap", 0)),
        has_scale_(n.has_attr("scale")),
        scale_(n.attr_float("scale", 1)) {
    if (mode_ < 0 || mode_ > 3) fail(n.describe(), ": qk_matmul_output_mode must be 0..3");
  }

  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState*) const override {
    return attention_cost(in, out);
  }
  void infer(InferContext& ctx) const override {
    const SymShape &q = ctx.shape(0), &k = ctx.shape(1), &v = ctx.shape(2);
    if (q.size() != k.size() || q.size() != v.size() || (q.size() != 3 && q.size() != 4)) ctx.fail("Q, K and V must all be 3-D or all 4-D");
    Dim past = Dim::known(0);
    if (ctx.has(4)) past = ctx.dim(4, 2);
    const bool four = q.size() == 4;
    if (!four && (q_heads_ <= 0 || kv_heads_ <= 0)) ctx.fail("3-D inputs need q_num_heads and kv_num_heads");
    const Dim B = q[0], Sq = four ? q[2] : q[1], Skv = four ? k[2] : k[1];
    const Dim Hq = four ? q[1] : Dim::known(q_heads_), Hkv = four ? k[1] : Dim::known(kv_heads_);
    auto div = [](const Dim& a, int64_t b) { return a.is_known() ? Dim::known(a.value / b) : Dim{}; };
    const Dim D = four ? k[3] : div(k[2], kv_heads_), Dv = four ? v[3] : div(v[2], kv_heads_);
    const Dim T =
        (past.is_known() && Skv.is_known()) ? Dim::known(checked_add(past.value, Skv.value, "Attention: past + new keys")) : Dim{};
    const DType t = ctx.dtype(0);
    if (four) ctx.set(0, t, SymShape{B, Hq, Sq, Dv});
    else
      ctx.set(0, t,
              SymShape{B, Sq, v[2].is_known() ? Dim::known(checked_mul(q_heads_, Dv.value, "Attention: heads x value size")) : Dim{}});
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
    const int64_t B = Q.dim(0), Sq = Q.dim(2), D = Q.dim(3), T = K.dim(2);
    Tensor bias = build_bias(ctx, B, hq, Sq, T);
    const bool want_qk = ctx.outputs.size() > 3 && ctx.out(3).defined();
    Tensor qk = want_qk ? Tensor(DType::Float32, {B, hq, Sq, T}) : Tensor();
    AttentionCall call;
    call.scale = has_scale_ ? scale_ : 1.0f / std::sqrt(static_cast<float>(D));
    call.softcap = softcap_;
    call.bias = &bias;
    if (want_qk) {
      call.record = &qk;
      call.record_stage = mode_ <= 1 ? 0 : mode_ - 1;
    }
    Tensor Y = attention(Q, K, V, call);
    convert_tensor(four ? Y : from_bhsd(Y), ctx.out(0));
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
