// GroupQueryAttention (com.microsoft), as onnxruntime-genai exports use it on the CPU: Q [B, S, Hq·D]
// with K/V [B, S, Hkv·D] (or one packed QKV input), past/present [B, Hkv, len, D] with a valid prefix
// per batch entry: seqlens_k[b] + 1 tokens in total, so entry b's past is seqlens_k[b] + 1 − S tokens
// (0 for a first prompt, which is right-padded) and its new keys land right after them. present has
// past + S rows. Optional rotary (do_rotary with cos/sin caches), causal local window (the last W keys),
// softcap, custom scale, additive attention_bias. sliding_window_cache (the onnxruntime-genai builder's
// local layers from 0.18: past and present one buffer of local_window_size slots) is taken over by tern's ring
// cache, which keeps a window of its own; run on the graph's cache it is refused, naming the attribute.
#include <cmath>
#include <cstring>

#include "core/checked_math.h"
#include "kernels/cpu/rope.h"
#include "ops/attention_common.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class GroupQueryAttentionOp : public Op, public CostedOp {
 public:
  enum Input : int {
    kQuery,
    kKey,
    kValue,
    kPastKey,
    kPastValue,
    kSeqlensK,
    kTotalSequenceLength,
    kCosCache,
    kSinCache,
    kPositionIds,
    kAttentionBias,
    kHeadSink
  };
  explicit GroupQueryAttentionOp(const Node& n)
      : hq_(n.attr_int("num_heads", 0)),
        hkv_(n.attr_int("kv_num_heads", 0)),
        rotary_(n.attr_int("do_rotary", 0) != 0),
        interleaved_(n.attr_int("rotary_interleaved", 0) != 0),
        local_window_(n.attr_int("local_window_size", -1)),
        causal_(n.attr_int("causal", 1) != 0),
        softcap_(n.attr_float("softcap", 0)),
        has_scale_(n.has_attr("scale")),
        scale_(n.attr_float("scale", 0)),
        window_buffer_(n.attr_int("sliding_window_cache", 0) != 0) {
    if (hq_ <= 0 || hkv_ <= 0 || hq_ % hkv_ != 0)
      fail(n.describe(), ": num_heads (", hq_, ") must be a positive multiple of kv_num_heads (", hkv_, ")");
    for (const char* a : {"smooth_softmax", "qk_output", "kv_cache_bit_width"})
      if (n.attr_int(a, 0) != 0) fail_unsupported(n.describe(), ": attribute ", a, " is not supported");
  }

  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState*) const override {
    return attention_cost(in, out);
  }
  void infer(InferContext& ctx) const override {
    const SymShape& q = ctx.shape(kQuery);
    if (q.size() != 3) ctx.fail("query must be [batch, sequence, hidden]");
    const bool packed = !ctx.has(kKey);
    Dim hidden = q[2];
    if (packed && hidden.is_known()) hidden = Dim::known(hidden.value / (hq_ + 2 * hkv_) * hq_);
    ctx.set(0, ctx.dtype(kQuery), SymShape{q[0], q[1], hidden});
    const Dim D = q[2].is_known() ? Dim::known(q[2].value / (packed ? hq_ + 2 * hkv_ : hq_)) : Dim{};
    Dim len = q[1];
    if (ctx.has(kPastKey)) {
      const Dim& p = ctx.dim(kPastKey, 2);
      len = p.is_known() && q[1].is_known() ? Dim::known(checked_add(p.value, q[1].value, "past + new sequence length")) : Dim{};
    }
    ctx.set(1, ctx.dtype(kQuery), SymShape{q[0], Dim::known(hkv_), len, D});
    ctx.set(2, ctx.dtype(kQuery), SymShape{q[0], Dim::known(hkv_), len, D});
  }

  void run(RunContext& ctx) const override {
    if (window_buffer_)
      fail_unsupported(ctx.node.describe(), ": sliding_window_cache (a window buffer of ", local_window_,
                       " slots for past and present) runs on ",
                       "tern's ring cache only: load with a window (--window, the default of tern generate)");
    const Tensor& qin = ctx.in(kQuery);
    const int64_t B = qin.dim(0), S = qin.dim(1);
    const bool packed = !ctx.has(kKey);
    const int64_t D = qin.dim(2) / (packed ? hq_ + 2 * hkv_ : hq_);
    Tensor q, k, v;
    if (packed) {
      Tensor all = cast_to(qin, DType::Float32);
      const int64_t W = all.dim(2);
      auto part = [&](int64_t from, int64_t heads) {
        Tensor t(DType::Float32, {B, S, heads * D});
        for (int64_t r = 0; r < B * S; ++r) std::copy_n(all.data<float>() + r * W + from, heads * D, t.data<float>() + r * heads * D);
        return to_bhsd(t, heads);
      };
      q = part(0, hq_);
      k = part(hq_ * D, hkv_);
      v = part((hq_ + hkv_) * D, hkv_);
    } else {
      q = to_bhsd(qin, hq_);
      k = to_bhsd(ctx.in(kKey), hkv_);
      v = to_bhsd(ctx.in(kValue), hkv_);
    }
    const std::vector<int64_t> seqlens = ctx.in(kSeqlensK).to_i64_vector();
    if (static_cast<int64_t>(seqlens.size()) != B) fail(ctx.node.describe(), ": seqlens_k must have one entry per batch");
    const bool has_past = ctx.has(kPastKey) && ctx.in(kPastKey).dim(2) > 0;
    const int64_t P = ctx.has(kPastKey) ? ctx.in(kPastKey).dim(2) : 0, L = P + S;
    std::vector<int64_t> past_len(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      const int64_t total = seqlens[static_cast<size_t>(b)] + 1;
      past_len[static_cast<size_t>(b)] = has_past ? total - S : 0;
      if (past_len[static_cast<size_t>(b)] < 0 || past_len[static_cast<size_t>(b)] > P || total > L)
        fail(ctx.node.describe(), ": seqlens_k[", b, "] = ", total - 1, " does not fit a past of ", P, " and ", S, " new tokens");
    }
    if (rotary_) apply_rotary(ctx, q, k, past_len, D);

    // present: per batch entry, the valid past rows then the new rows; later rows are zero.
    Tensor pk = has_past ? cast_to(ctx.in(kPastKey), DType::Float32) : Tensor(),
           pv = has_past ? cast_to(ctx.in(kPastValue), DType::Float32) : Tensor();
    Tensor K(DType::Float32, {B, hkv_, L, D}), V(DType::Float32, {B, hkv_, L, D});
    std::memset(K.raw(), 0, K.nbytes());
    std::memset(V.raw(), 0, V.nbytes());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < hkv_; ++h) {
        const int64_t pl = past_len[static_cast<size_t>(b)];
        const size_t row = static_cast<size_t>(D) * 4;
        char* kd = static_cast<char*>(K.raw()) + static_cast<size_t>((b * hkv_ + h) * L) * row;
        char* vd = static_cast<char*>(V.raw()) + static_cast<size_t>((b * hkv_ + h) * L) * row;
        if (pl > 0) {
          std::memcpy(kd, static_cast<const char*>(pk.raw()) + static_cast<size_t>((b * hkv_ + h) * P) * row,
                      static_cast<size_t>(pl) * row);
          std::memcpy(vd, static_cast<const char*>(pv.raw()) + static_cast<size_t>((b * hkv_ + h) * P) * row,
                      static_cast<size_t>(pl) * row);
        }
        std::memcpy(kd + static_cast<size_t>(pl) * row, static_cast<const char*>(k.raw()) + static_cast<size_t>((b * hkv_ + h) * S) * row,
                    static_cast<size_t>(S) * row);
        std::memcpy(vd + static_cast<size_t>(pl) * row, static_cast<const char*>(v.raw()) + static_cast<size_t>((b * hkv_ + h) * S) * row,
                    static_cast<size_t>(S) * row);
      }

    // Bias: query i of entry b sits at position past_b + i and sees keys j <= that position
    // (and, with a local window W, the W most recent: j > position − W).
    Tensor bias = allowed_bias(B, hq_, S, L, kNegInf, [&](int64_t b, int64_t i, int64_t j) {
      const int64_t pos = past_len[static_cast<size_t>(b)] + i;
      const bool seen = causal_ ? j <= pos : j <= seqlens[static_cast<size_t>(b)];
      return seen && !(local_window_ > 0 && j <= pos - local_window_);
    });
    if (ctx.has(kAttentionBias)) add_attention_bias(bias, ctx.in(kAttentionBias), ctx.node);
    AttentionCall call;
    call.scale = has_scale_ && scale_ != 0.0f ? scale_ : 1.0f / std::sqrt(static_cast<float>(D));
    call.softcap = softcap_;
    call.bias = &bias;
    convert_tensor(from_bhsd(attention(q, K, V, call)), ctx.out(0));
    if (ctx.outputs.size() > 1 && ctx.out(1).defined()) convert_tensor(K, ctx.out(1));
    if (ctx.outputs.size() > 2 && ctx.out(2).defined()) convert_tensor(V, ctx.out(2));
  }

 private:
  // Rotates the new queries and keys in place at their absolute positions.
  void apply_rotary(const RunContext& ctx, Tensor& q, Tensor& k, const std::vector<int64_t>& past_len, int64_t D) const {
    if (!ctx.has(kCosCache) || !ctx.has(kSinCache)) fail(ctx.node.describe(), ": do_rotary needs cos_cache and sin_cache");
    Tensor c = cast_to(ctx.in(kCosCache), DType::Float32), s = cast_to(ctx.in(kSinCache), DType::Float32);
    const int64_t half = c.dim(1), rot = 2 * half, B = q.dim(0), S = q.dim(2);
    if (rot > D) fail(ctx.node.describe(), ": cos_cache has ", half, " columns, more than half the head size ", D);
    std::vector<int64_t> ids = ctx.has(kPositionIds) ? ctx.in(kPositionIds).to_i64_vector() : std::vector<int64_t>{};
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t p =
            ids.size() == static_cast<size_t>(B * S) ? ids[static_cast<size_t>(b * S + i)] : past_len[static_cast<size_t>(b)] + i;
        if (p < 0 || p >= c.dim(0)) fail(ctx.node.describe(), ": position ", p, " is outside the cos/sin cache of ", c.dim(0), " rows");
        for (Tensor* t : {&q, &k}) {
          const int64_t H = t->dim(1);
          for (int64_t h = 0; h < H; ++h) {
            float* x = t->data<float>() + ((b * H + h) * S + i) * D;
            std::vector<float> tmp(x, x + D);
            kernels::rope_rotate(tmp.data(), x, c.data<float>() + p * half, s.data<float>() + p * half, rot, D, interleaved_);
          }
        }
      }
  }

  int64_t hq_, hkv_;
  bool rotary_, interleaved_;
  int64_t local_window_;
  bool causal_;
  float softcap_;
  bool has_scale_;
  float scale_;
  bool window_buffer_;  // sliding_window_cache
};

}  // namespace

void register_group_query_attention(OpRegistry& r) { r.add("com.microsoft", "GroupQueryAttention", factory<GroupQueryAttentionOp>()); }

}  // namespace tern
